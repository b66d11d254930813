//! The tokio message API over the simulated link: send/recv, WRITE with immediate, READ.

use bth_io::api::sim_pair;
use bth_io::sim::LinkConfig;
use bth_placement::Access;
use bth_tests::pattern;
use std::time::Duration;

/// Each test's whole body, bounded: the simulated link runs in virtual time, so a transfer
/// that stops making progress (a connection retransmitting forever) would hang the suite
/// instead of failing it. These take well under a second; the bound is a guard against a
/// hang, not a timing assertion.
async fn within<T>(body: impl std::future::Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(60), body)
        .await
        .expect("the test stalled: no result within 60 s of wall-clock time")
}

#[tokio::test]
async fn send_recv_write_read_over_an_impaired_link() {
    within(async {
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
    })
    .await
}

#[path = "../../bin/examples/async_app/mod.rs"]
mod app;

/// The example's application (the code a user copies), unchanged, over the simulated link
/// with loss and reordering; `tun_async.rs` runs the same code over the io_uring TUN path.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_example_application_runs_over_the_simulated_link() {
    within(async {
        let link = LinkConfig::default()
            .with_loss(0.01)
            .with_reorder(0.1, Duration::from_micros(50))
            .with_seed(11);
        let (a, b, cfg) = bth_io::api::sim_endpoints(link, 11);
        let server = tokio::spawn(app::server(b, 32, 50_000));
        let client = app::client(a, cfg, 32, 50_000).await.expect("client");
        let server = server.await.unwrap().expect("server");
        assert_eq!(server.messages, 33, "32 SENDs and the WRITE checked");
        assert_eq!(server.bytes, 32 * 50_000 + app::REGION as u64 / 2);
        assert_eq!(client.bytes, app::REGION as u64 / 2);
    })
    .await
}

/// Many QPs on one simulated endpoint pair through the async API, each with its own traffic.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_qps_share_one_endpoint() {
    within(async {
        let (a, b, cfg) = bth_io::api::sim_endpoints(LinkConfig::default().with_seed(3), 3);
        const N: u64 = 50;
        let server = tokio::spawn(async move {
            let mut tasks = Vec::new();
            for _ in 0..N {
                let qp = b.accept().await.expect("accept");
                tasks.push(tokio::spawn(async move { qp.recv(64).await }));
            }
            let mut got = Vec::new();
            for t in tasks {
                got.push(t.await.unwrap().expect("recv").data);
            }
            got
        });
        let mut clients = Vec::new();
        for i in 0..N {
            let (a, cfg) = (a.clone(), cfg.clone());
            clients.push(tokio::spawn(async move {
                let qp = a.connect(cfg).await.expect("connect");
                qp.send(i.to_be_bytes().to_vec(), None).await.expect("send");
            }));
        }
        for c in clients {
            c.await.unwrap();
        }
        let mut got: Vec<u64> = server
            .await
            .unwrap()
            .iter()
            .map(|d| u64::from_be_bytes(d[..8].try_into().unwrap()))
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..N).collect::<Vec<_>>());
    })
    .await
}

/// A receive waiting when the peer closes in order learns it (it used to wait forever), and a
/// dropped `write_notice` future does not swallow the notice meant for the next caller.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_learn_of_an_orderly_close_and_notices_survive_a_dropped_waiter() {
    within(async {
        let (a, b) = sim_pair(LinkConfig::default().with_seed(9), 9)
            .await
            .expect("connected");
        let region = b
            .register(vec![0u8; 4096], Access::REMOTE_WRITE | Access::LOCAL_WRITE)
            .await
            .unwrap();
        // A waiter that gives up before anything arrives.
        let gave_up = tokio::time::timeout(Duration::from_millis(20), b.write_notice()).await;
        assert!(gave_up.is_err(), "nothing was written yet");
        a.write(region.rkey, region.addr, vec![7u8; 100], Some(5))
            .await
            .unwrap();
        let n = b
            .write_notice()
            .await
            .expect("the notice reaches the next caller");
        assert_eq!((n.imm, n.len), (5, 100));
        // B waits for a message; A closes instead.
        let waiting = tokio::spawn({
            let b = b.clone();
            async move { b.recv(64).await }
        });
        tokio::task::yield_now().await;
        a.close().await.unwrap();
        let r = tokio::time::timeout(Duration::from_secs(10), waiting)
            .await
            .expect("the receive resolves")
            .unwrap();
        assert_eq!(r, Err(bth_io::api::ApiError::Closed));
    })
    .await
}
