//! Helpers shared by the unit tests of the capture modules.

use super::{CaptureReader, PcapWriter, RawPacket};
use bth_wire::{Bth, IpPair, Opcode, TcpFlags, TcpOptions, TcpRepr, Timestamps};
use std::time::Duration;

pub(super) const V4: IpPair = IpPair::V4 {
    src: [192, 0, 2, 1],
    dst: [192, 0, 2, 2],
};
pub(super) const V6: IpPair = IpPair::V6 {
    src: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1],
    dst: [0x20, 1, 0xd, 0xb8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2],
};

pub(super) fn segment(ip: IpPair, seq: u32, bth: Option<Bth>, payload: &[u8]) -> Vec<u8> {
    let bth = bth.map(|mut b| {
        b.seal(payload);
        b
    });
    TcpRepr {
        src_port: 1000,
        dst_port: 2000,
        seq,
        ack: 9,
        flags: TcpFlags::ACK,
        window: 100,
        urgent: 0,
        options: TcpOptions {
            bth,
            ..TcpOptions::default()
        },
        payload,
    }
    .to_vec(ip)
    .unwrap()
}

pub(super) fn send(msn: u16, opcode: Opcode, offset: u32) -> Bth {
    let mut b = Bth::new(opcode);
    b.msn = msn;
    b.mbo = offset;
    b.timestamps = Some(Timestamps { tsval: 1, tsecr: 2 });
    b
}

pub(super) fn raw(linktype: u32, data: Vec<u8>) -> RawPacket {
    RawPacket {
        ts: Duration::ZERO,
        linktype,
        orig_len: data.len() as u32,
        data,
    }
}

pub(super) fn write(packets: &[(IpPair, Vec<u8>)]) -> Vec<u8> {
    let mut w = PcapWriter::new(Vec::new()).unwrap();
    for (i, (ip, s)) in packets.iter().enumerate() {
        w.write_tcp(Duration::new(1, i as u32 * 1000 + 7), *ip, s)
            .unwrap();
    }
    w.finish().unwrap()
}

pub(super) fn ip_packet(seg: &[u8]) -> Vec<u8> {
    let file = write(&[(V4, seg.to_vec())]);
    CaptureReader::new(&file[..])
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .data
}
