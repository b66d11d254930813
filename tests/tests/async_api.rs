//! The tokio message API over the simulated link: send/recv, WRITE with immediate, READ.

use bth_placement::Access;
use bth_tests::pattern;
use std::time::Duration;
use tcp_bth_io::api::sim_pair;
use tcp_bth_io::sim::LinkConfig;

#[tokio::test]
async fn send_recv_write_read_over_an_impaired_link() {
    let link = LinkConfig::default()
        .with_loss(0.02)
        .with_reorder(0.2, Duration::from_micros(40))
        .with_seed(5);
    let (a, b) = sim_pair(link, 5).await.expect("connected");

    // SEND/recv: the receiver posts first, the sender's future resolves on acknowledgement.
    let msg = pattern(1, 200_000);
    let recv = tokio::spawn({
        let b = b.clone();
        async move { b.recv(256 * 1024).await }
    });
    tokio::task::yield_now().await;
    a.send(msg.clone(), Some(42)).await.expect("send");
    let got = recv.await.unwrap().expect("recv");
    assert_eq!(got.data, msg);
    assert_eq!(got.imm, Some(42));

    // WRITE with immediate into B's region, B is notified, the region holds the bytes.
    let region = b
        .register(
            vec![0u8; 100_000],
            Access::REMOTE_WRITE | Access::LOCAL_WRITE,
        )
        .await
        .unwrap();
    let data = pattern(2, 50_000);
    a.write(region.rkey, region.addr + 1000, data.clone(), Some(7))
        .await
        .unwrap();
    let notice = b.write_notice().await.unwrap();
    assert_eq!((notice.imm, notice.len), (7, 50_000));
    let contents = b.region(region.rkey).await.unwrap();
    assert_eq!(&contents[1000..51_000], &data[..]);
    assert!(contents[..1000].iter().all(|&x| x == 0));

    // READ from B's region.
    let src = pattern(3, 70_000);
    let ro = b.register(src.clone(), Access::REMOTE_READ).await.unwrap();
    let read = a.read(ro.rkey, ro.addr + 5, 60_000).await.unwrap();
    assert_eq!(&read[..], &src[5..60_005]);

    // A WRITE outside the region is refused: the connection fails with a remote access error.
    let err = a.write(ro.rkey, ro.addr, vec![1u8; 10], None).await;
    assert!(err.is_err(), "write to a read-only region succeeded");
}
