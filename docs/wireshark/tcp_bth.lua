-- tcp_bth.lua: a Wireshark / tshark dissector for the tcp_bth TCP option
-- (TCP option kind 254, RFC 6994 experiment ID 0xEFAB), which carries a compact RDMA Base
-- Transport Header in every segment of a tcp-bth connection. Wire format: docs/option.md.
--
-- Use with tshark (from the repository root):
--
--   tshark -X lua_script:docs/wireshark/tcp_bth.lua -r file.pcap -d tcp.port==4791,data \
--          -T fields -e frame.number -e tcp_bth.opcode -e tcp_bth.msn -e tcp_bth.offset
--
--   tshark -X lua_script:docs/wireshark/tcp_bth.lua -r file.pcap -Y 'tcp_bth.icrc.status == 0'
--   tshark -X lua_script:docs/wireshark/tcp_bth.lua -r file.pcap -O tcp_bth     (detail view)
--
-- `-d tcp.port==4791,data` (first example) makes tshark decode port 4791, the port bth-perf,
-- bth-compare and `bth demo` use, as plain data, so its SMPP heuristic cannot claim the random
-- payload there and report it as malformed SMPP (tests/tests/capture.rs passes the same flag).
--
-- Preference: tcp_bth.check_icrc (default TRUE) verifies each ICRC in Lua, which takes about
-- 3 s per 10 MB of payload; for large captures add `-o tcp_bth.check_icrc:FALSE`.
--
-- or with Wireshark: copy this file into the personal Lua plugins folder (Help > About
-- Wireshark > Folders > Personal Lua Plugins, e.g. ~/.local/lib/wireshark/plugins/) and reload
-- (Analyze > Reload Lua Plugins, Ctrl+Shift+L). Captures: `bth demo --pcap FILE`, or tcpdump.
--
-- Wireshark does not let a Lua script hook one TCP option kind, so this is a postdissector:
-- after the TCP dissector has run it takes the bytes of each `tcp.options` field, walks the
-- option list (EOL, NOP, kind/length), and for kind 254 with ExID 0xEFAB adds a "TCP BTH"
-- tree with the fields below. Payload bytes for the ICRC check are found from the TCP header
-- position (`tcp.options` starts 20 bytes into it), `tcp.hdr_len` and `tcp.len`.
--
-- Fields (all filterable):
--   tcp_bth.len  tcp_bth.exid  tcp_bth.flags  tcp_bth.version  tcp_bth.t  tcp_bth.m
--   tcp_bth.rtr  tcp_bth.rtr_ack  tcp_bth.s  tcp_bth.rsvd  tcp_bth.opcode  tcp_bth.msn
--   tcp_bth.offset  tcp_bth.seg  tcp_bth.icrc
--   tcp_bth.icrc.status  0 bad, 1 good, 2 unverified (payload not captured whole, or the
--                        check turned off), 3 not applicable: an S-framed data segment has no
--                        ICRC (its bytes 8-11 are the message length; the TCP checksum is its
--                        check), so it is neither good nor bad and never raises icrc_bad
--   tcp_bth.tsval  tcp_bth.tsecr  tcp_bth.imm  tcp_bth.rkey  tcp_bth.addr
--   tcp_bth.syndrome     ACKNOWLEDGE with R=0: the low byte of mbo_seg, an AETH syndrome
--                        (0x00 ACK, 0x61 invalid request, 0x62 remote access error,
--                        0x63 remote operational error)
--   tcp_bth.nak          present (TRUE) on a NAK: the syndrome is a NAK code and the offset
--                        field names the opcode of the failed message, whose MSN is tcp_bth.msn
--   tcp_bth.nak.opcode   that opcode
--   tcp_bth.zero_length  present (TRUE) on the one segment of a zero-length SEND/RDMA WRITE:
--                        offset field 0xFFFFFF, one pad byte of payload that is not message data
-- The raw fields (tcp_bth.offset, tcp_bth.seg) always show the bytes as they are (on S-framed
-- data the offset field as tcp_bth.anchor, below); the three forms above are interpretations
-- added next to them. Wire format of all three: docs/option.md. tcp_bth.rsvd is bit 7 alone.
--
-- S framing (sequence-anchored, spec amendment 3: flag S, 0x40). tcp_bth.s is the flag, on
-- every option of a connection that negotiated it. An S-framed data segment (a message opcode,
-- always an ONLY form) carries the same option in every segment of its message, so its fields
-- mean something else, and are shown under their own names instead of tcp_bth.offset and
-- tcp_bth.icrc:
--   tcp_bth.anchor       the offset field: stream offset of the message's first byte mod 2^24
--   tcp_bth.msg_len      bytes 8-11: the message's length (no ICRC: icrc.status 3)
--   tcp_bth.stream_off   stream offset of the segment's first payload byte: its sequence
--                        number - ISN - 1 (mod 2^32), i.e. Wireshark's relative tcp.seq - 1;
--                        computed here from tcp.seq_raw and the sequence number of the SYN of
--                        the same direction (tcp.stream), so it is right whether relative
--                        sequence numbers are on or off
--   tcp_bth.place_off    placement offset of that byte in its message:
--                        (stream_off - anchor) mod 2^24
-- When the capture does not hold that SYN (where Wireshark's relative numbers would start at 1
-- from a guess), stream_off and place_off are absent and the tree says the offset is unknown.
-- A zero-length message in S framing is msg_len 0 with one pad byte (tcp_bth.zero_length).
-- A hello (opcode 0xFF, SYN and SYN-ACK) with T=0 is 16 bytes and has no tcp_bth.tsval or
-- tcp_bth.tsecr: amendment 4 lets a SYN's hello leave the timestamps to the RFC 7323 option
-- beside it (tcp.options.timestamp.tsval), so that a peer without BTH still negotiates them
-- when the connection falls back to plain TCP; the info column shows "HELLO ... T=0".
-- Expert infos: tcp_bth.len_inconsistent (length disagrees with the T flag and the opcode),
--   tcp_bth.truncated, tcp_bth.unknown_opcode, tcp_bth.version_unsupported, tcp_bth.m_inconsistent,
--   tcp_bth.icrc_bad, tcp_bth.zero_length_invalid (offset 0xFFFFFF on an opcode without a
--   zero-length form, or with a payload other than one pad byte; in S framing msg_len 0 on
--   such an opcode or payload), tcp_bth.nak_received (a NAK: the connection ends with this RST),
--   tcp_bth.s_beyond_msg_len (an S-framed segment whose place_off + payload length passes its
--   msg_len), tcp_bth.s_invalid (S on a FIRST, MIDDLE or LAST opcode, a segment index other
--   than 0, or a msg_len of 2^24 or more), tcp_bth.ts_missing (an ACKNOWLEDGE with T=0, which
--   the codec refuses: only a hello may leave out the timestamps).
--
-- Tested with tshark 4.0 (Lua 5.2); uses the `bit32` or `bit` library, or Lua 5.3+ operators.

local bitops = bit32 or bit
if not bitops then
    -- Lua 5.3+ without the compatibility libraries: native operators, compiled at run time
    -- so that older Lua versions can still parse this file.
    bitops = load([[
        return {
            band = function(a, b) return a & b end,
            bxor = function(a, b) return a ~ b end,
            rshift = function(a, n) return (a & 0xFFFFFFFF) >> n end,
        }
    ]])()
end
local band, bxor, rshift = bitops.band, bitops.bxor, bitops.rshift

local KIND = 254
local EXID_HI, EXID_LO = 0xEF, 0xAB

-- opcode -> name, position ("F"irst, "M"iddle, "L"ast, "O"nly) and extension length
local OPCODES = {
    [0x00] = { "SEND_FIRST", "F", 0 },
    [0x01] = { "SEND_MIDDLE", "M", 0 },
    [0x02] = { "SEND_LAST", "L", 0 },
    [0x03] = { "SEND_LAST_WITH_IMMEDIATE", "L", 4 },
    [0x04] = { "SEND_ONLY", "O", 0 },
    [0x05] = { "SEND_ONLY_WITH_IMMEDIATE", "O", 4 },
    [0x06] = { "RDMA_WRITE_FIRST", "F", 12 },
    [0x07] = { "RDMA_WRITE_MIDDLE", "M", 12 },
    [0x08] = { "RDMA_WRITE_LAST", "L", 12 },
    [0x09] = { "RDMA_WRITE_LAST_WITH_IMMEDIATE", "L", 16 },
    [0x0A] = { "RDMA_WRITE_ONLY", "O", 12 },
    [0x0B] = { "RDMA_WRITE_ONLY_WITH_IMMEDIATE", "O", 16 },
    [0x0C] = { "RDMA_READ_REQUEST", "O", 0 },
    [0x0D] = { "RDMA_READ_RESPONSE_FIRST", "F", 0 },
    [0x0E] = { "RDMA_READ_RESPONSE_MIDDLE", "M", 0 },
    [0x0F] = { "RDMA_READ_RESPONSE_LAST", "L", 0 },
    [0x10] = { "RDMA_READ_RESPONSE_ONLY", "O", 0 },
    [0x11] = { "ACKNOWLEDGE", "O", 0 },
    [0xFF] = { "HELLO", "O", 0 },
}
local opcode_names = {}
for v, d in pairs(OPCODES) do
    opcode_names[v] = d[1]
end

local ACKNOWLEDGE = 0x11
-- The offset field of a zero-length message's segment (no real byte can sit at 2^24 - 1).
local ZERO_LENGTH_MBO = 0xFFFFFF
-- Opcodes with a zero-length form: SEND_ONLY[_WITH_IMMEDIATE], RDMA_WRITE_ONLY[_WITH_IMMEDIATE].
local ZERO_LENGTH_OPCODES = { [0x04] = true, [0x05] = true, [0x0A] = true, [0x0B] = true }
-- AETH syndromes an ACKNOWLEDGE with R=0 carries: 0 = ACK, the rest NAK codes.
local SYNDROMES = {
    [0x00] = "ACK",
    [0x61] = "NAK invalid request",
    [0x62] = "NAK remote access error",
    [0x63] = "NAK remote operational error",
}
local NAK_NAMES = {
    [0x61] = "invalid-request",
    [0x62] = "remote-access-error",
    [0x63] = "remote-operational-error",
}

-- Opcodes of a message class (SEND, RDMA WRITE, READ request, READ response): 0x00-0x10.
local function is_message_opcode(op)
    return op <= 0x10
end

local p = Proto("tcp_bth", "TCP BTH")

local F = {
    len = ProtoField.uint8("tcp_bth.len", "Length", base.DEC),
    exid = ProtoField.uint16("tcp_bth.exid", "Experiment ID", base.HEX),
    flags = ProtoField.uint8("tcp_bth.flags", "Flags", base.HEX),
    version = ProtoField.uint8("tcp_bth.version", "Version", base.DEC, nil, 0x03),
    t = ProtoField.bool("tcp_bth.t", "T (timestamps present)", 8, nil, 0x04),
    m = ProtoField.bool("tcp_bth.m", "M (more segments)", 8, nil, 0x08),
    rtr = ProtoField.bool("tcp_bth.rtr", "R (rtr: MSN and offset carry a receive credit)", 8, nil, 0x10),
    rtr_ack = ProtoField.bool("tcp_bth.rtr_ack", "A (rtr_ack)", 8, nil, 0x20),
    s = ProtoField.bool("tcp_bth.s", "S (sequence-anchored framing)", 8, nil, 0x40),
    rsvd = ProtoField.uint8("tcp_bth.rsvd", "Reserved", base.HEX, nil, 0x80),
    opcode = ProtoField.uint8("tcp_bth.opcode", "Opcode", base.HEX, opcode_names),
    msn = ProtoField.uint16("tcp_bth.msn", "MSN", base.DEC),
    offset = ProtoField.uint24("tcp_bth.offset", "Message byte offset", base.DEC),
    seg = ProtoField.uint8("tcp_bth.seg", "Segment number", base.DEC),
    icrc = ProtoField.uint32("tcp_bth.icrc", "ICRC", base.HEX),
    icrc_status = ProtoField.uint8("tcp_bth.icrc.status", "ICRC status", base.DEC,
        { [0] = "Bad", [1] = "Good", [2] = "Unverified",
          [3] = "Not applicable (S framing: no ICRC, the TCP checksum checks)" }),
    anchor = ProtoField.uint24("tcp_bth.anchor",
        "Anchor (stream offset of the message's first byte mod 2^24)", base.HEX),
    msg_len = ProtoField.uint32("tcp_bth.msg_len", "Message length", base.DEC),
    stream_off = ProtoField.uint32("tcp_bth.stream_off",
        "Stream offset (SEQ - ISN - 1)", base.DEC),
    place_off = ProtoField.uint24("tcp_bth.place_off",
        "Placement offset ((stream offset - anchor) mod 2^24)", base.DEC),
    tsval = ProtoField.uint32("tcp_bth.tsval", "TSval", base.DEC),
    tsecr = ProtoField.uint32("tcp_bth.tsecr", "TSecr", base.DEC),
    imm = ProtoField.uint32("tcp_bth.imm", "Immediate data", base.HEX),
    rkey = ProtoField.uint32("tcp_bth.rkey", "R_Key", base.HEX),
    addr = ProtoField.uint64("tcp_bth.addr", "Remote address", base.HEX),
    syndrome = ProtoField.uint8("tcp_bth.syndrome", "Syndrome (AETH)", base.HEX, SYNDROMES),
    nak = ProtoField.bool("tcp_bth.nak", "NAK"),
    nak_opcode = ProtoField.uint24("tcp_bth.nak.opcode", "NAK for opcode", base.HEX, opcode_names),
    zero_length = ProtoField.bool("tcp_bth.zero_length", "Zero-length message (1 pad byte)"),
}
p.fields = F

local E = {
    len = ProtoExpert.new("tcp_bth.len_inconsistent",
        "tcp_bth option length inconsistent with its T flag and opcode",
        expert.group.MALFORMED, expert.severity.ERROR),
    truncated = ProtoExpert.new("tcp_bth.truncated", "tcp_bth option shorter than 16 bytes",
        expert.group.MALFORMED, expert.severity.ERROR),
    opcode = ProtoExpert.new("tcp_bth.unknown_opcode", "Unknown tcp_bth opcode",
        expert.group.MALFORMED, expert.severity.ERROR),
    version = ProtoExpert.new("tcp_bth.version_unsupported", "Unsupported tcp_bth version",
        expert.group.MALFORMED, expert.severity.ERROR),
    more = ProtoExpert.new("tcp_bth.m_inconsistent", "M bit contradicts the opcode",
        expert.group.MALFORMED, expert.severity.WARN),
    icrc = ProtoExpert.new("tcp_bth.icrc_bad", "ICRC does not match option header and payload",
        expert.group.CHECKSUM, expert.severity.ERROR),
    zero_length = ProtoExpert.new("tcp_bth.zero_length_invalid",
        "Offset 0xFFFFFF (zero-length form) on a segment that cannot be zero-length",
        expert.group.MALFORMED, expert.severity.ERROR),
    nak = ProtoExpert.new("tcp_bth.nak_received", "NAK: the responder failed a message",
        expert.group.RESPONSE_CODE, expert.severity.WARN),
    s_beyond = ProtoExpert.new("tcp_bth.s_beyond_msg_len",
        "S-framed segment passes the end of its message (placement offset + payload > length)",
        expert.group.MALFORMED, expert.severity.ERROR),
    ts_missing = ProtoExpert.new("tcp_bth.ts_missing",
        "ACKNOWLEDGE without timestamps (T=0): the BTH form of a pure ACK must carry them",
        expert.group.MALFORMED, expert.severity.ERROR),
    s_invalid = ProtoExpert.new("tcp_bth.s_invalid",
        "S framing on a FIRST/MIDDLE/LAST opcode, a segment index other than 0, or a message "
        .. "length of 2^24 or more",
        expert.group.MALFORMED, expert.severity.ERROR),
}
p.experts = { E.len, E.truncated, E.opcode, E.version, E.more, E.icrc, E.zero_length, E.nak,
    E.s_beyond, E.s_invalid, E.ts_missing }

-- CRC32C (Castagnoli, reflected polynomial 0x82F63B78), table driven.
local CRC_TABLE = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if band(c, 1) ~= 0 then
            c = bxor(rshift(c, 1), 0x82F63B78)
        else
            c = rshift(c, 1)
        end
    end
    CRC_TABLE[i] = c
end

local function crc32c_update(crc, bytes)
    for i = 0, bytes:len() - 1 do
        crc = bxor(rshift(crc, 8), CRC_TABLE[band(bxor(crc, bytes:get_index(i)), 0xFF)])
    end
    return crc
end

local function u32(x)
    return x % 4294967296 -- the `bit` library returns signed 32-bit numbers
end

p.prefs.check_icrc = Pref.bool("Verify the ICRC", true,
    "Compute the CRC32C of every BTH segment's header and payload (about 3 s per 10 MB of "
    .. "payload in Lua); turn off for large captures: -o tcp_bth.check_icrc:FALSE")

local f_options = Field.new("tcp.options")
local f_hdr_len = Field.new("tcp.hdr_len")
local f_len = Field.new("tcp.len")
local f_seq_raw = Field.new("tcp.seq_raw")
local f_syn = Field.new("tcp.flags.syn")
local f_stream = Field.new("tcp.stream")
local f_srcport = Field.new("tcp.srcport")

local S_FLAG = 0x40
local TWO32 = 4294967296
local TWO24 = 16777216

-- ISNs of the SYNs seen, per direction of a TCP stream: isns[key] = list of { frame, isn } in
-- frame order. A segment takes the ISN of the latest SYN at or before its frame, so random
-- access in the Wireshark GUI gives what a pass in order gives. Reset for every file.
local isns = {}
function p.init()
    isns = {}
end

local function direction_key(pinfo, stream, port)
    return string.format("%d/%s/%d", stream, tostring(pinfo.src), port)
end

local function note_syn(key, frame, isn)
    local list = isns[key]
    if not list then
        list = {}
        isns[key] = list
    end
    for _, e in ipairs(list) do
        if e[1] == frame then
            return
        end
    end
    list[#list + 1] = { frame, isn }
    table.sort(list, function(a, b) return a[1] < b[1] end)
end

local function isn_at(key, frame)
    local found = nil
    for _, e in ipairs(isns[key] or {}) do
        if e[1] <= frame then
            found = e[2]
        end
    end
    return found
end

-- What the option says, in words, for the tree and the info column.
-- plen: the TCP payload length, or nil when unknown.
local function summary_of(name, flags, op, msn, off, syndrome, plen)
    if op == 0xFF then
        local text = string.format("%s first-msn=%d max-msg=%d", name, msn, off)
        if band(flags, 0x04) == 0 then
            -- Amendment 4: a SYN's hello without timestamps, beside the RFC 7323 option.
            text = text .. " T=0"
        end
        return text
    elseif band(flags, 0x10) ~= 0 then
        return string.format("%s credit-msn=%d grant=%dx4KiB", name, msn, off)
    elseif op == ACKNOWLEDGE then
        if NAK_NAMES[syndrome] and is_message_opcode(off) then
            return string.format("NAK %s for %s msn=%d", NAK_NAMES[syndrome],
                opcode_names[off], msn)
        elseif syndrome == 0 and off == 0 then
            return string.format("ACK completed-msn=%d", msn)
        end
        return string.format("%s msn=%d off=%d syndrome=0x%02x", name, msn, off, syndrome)
    elseif off == ZERO_LENGTH_MBO and ZERO_LENGTH_OPCODES[op] and plen == 1 then
        return string.format("%s msn=%d zero-length", name, msn)
    end
    return string.format("%s msn=%d off=%d", name, msn, off)
end

local function summary(name, flags, op, msn, off, syndrome, plen)
    local text = summary_of(name, flags, op, msn, off, syndrome, plen)
    if band(flags, S_FLAG) ~= 0 then
        -- A control form (hello, ACK, credit, NAK) of an S-framed connection.
        text = text .. " S"
    end
    return text
end

-- An S-framed data segment in words: "SEND_ONLY S msn=4 anchor=0x00009b off=1420 len=53359".
local function summary_s(name, msn, anchor, place, msg_len, zero_length)
    local text = string.format("%s S msn=%d anchor=0x%06x off=%s len=%d", name, msn, anchor,
        place and tostring(place) or "unknown", msg_len)
    if zero_length then
        text = text .. " zero-length"
    end
    return text
end

-- payload: a ByteArray, or nil when the capture does not hold the whole payload
-- plen: the TCP payload length (tcp.len), or nil when it cannot be paired with this option
-- stream_off: the stream offset of the segment's first payload byte (SEQ - ISN - 1), or nil
-- when the SYN of its direction is not in the capture
local function dissect_option(r, olen, payload, plen, stream_off, pinfo, tree)
    local sub = tree:add(p, r)
    sub:add(F.len, r:range(1, 1))
    sub:add(F.exid, r:range(2, 2))
    if olen < 16 then
        sub:add_proto_expert_info(E.truncated, string.format("tcp_bth option of %d bytes", olen))
        sub:append_text(string.format(" (truncated: %d bytes)", olen))
        return
    end
    local flags_r = r:range(4, 1)
    local flags = flags_r:uint()
    local ft = sub:add(F.flags, flags_r)
    ft:add(F.version, flags_r)
    ft:add(F.t, flags_r)
    ft:add(F.m, flags_r)
    ft:add(F.rtr, flags_r)
    ft:add(F.rtr_ack, flags_r)
    ft:add(F.s, flags_r)
    ft:add(F.rsvd, flags_r)
    local op_r = r:range(5, 1)
    local op = op_r:uint()
    local oi = sub:add(F.opcode, op_r)
    local msn = r:range(6, 2):uint()
    local off = r:range(8, 3):uint()
    local low = r:range(11, 1):uint()
    local def = OPCODES[op]
    local name = def and def[1] or string.format("opcode 0x%02x", op)
    -- S-framed data (amendment 3): the offset field is the anchor, bytes 8-11 the message
    -- length; there is no ICRC. Control forms keep their fields and ICRC in S framing.
    local s_data = band(flags, S_FLAG) ~= 0 and is_message_opcode(op)
    sub:add(F.msn, r:range(6, 2))
    local off_item
    local what
    if s_data then
        off_item = sub:add(F.anchor, r:range(8, 3))
    else
        off_item = sub:add(F.offset, r:range(8, 3))
    end
    sub:add(F.seg, r:range(11, 1))
    local rtr = band(flags, 0x10) ~= 0
    if s_data then
        local msg_len = r:range(12, 4):uint()
        local li = sub:add(F.msg_len, r:range(12, 4))
        local place = nil
        if stream_off then
            place = (stream_off - off) % TWO24
            sub:add(F.stream_off, stream_off):set_generated()
            local pi = sub:add(F.place_off, place)
            pi:set_generated()
            if plen and msg_len == 0 then
                -- Zero-length: one pad byte at placement offset 0.
                if place ~= 0 then
                    pi:add_proto_expert_info(E.s_beyond, string.format(
                        "placement offset %d in a message of 0 bytes", place))
                end
            elseif plen and place + plen > msg_len then
                pi:add_proto_expert_info(E.s_beyond, string.format(
                    "placement offset %d + %d payload bytes passes the message's %d bytes",
                    place, plen, msg_len))
            end
        else
            sub:add(r:range(8, 3), "Placement offset: unknown (the SYN of this direction is "
                .. "not in the capture)"):set_generated()
        end
        local zero_length = false
        if msg_len == 0 and plen then
            if ZERO_LENGTH_OPCODES[op] and plen == 1 then
                zero_length = true
                sub:add(F.zero_length, r:range(12, 4), true):set_generated()
            else
                li:add_proto_expert_info(E.zero_length, string.format(
                    "message length 0 on %s with %d payload bytes (needs a SEND or RDMA WRITE "
                    .. "ONLY opcode and 1 pad byte)", name, plen))
            end
        end
        if (def and def[2] ~= "O") or low ~= 0 or msg_len >= TWO24 then
            sub:add_proto_expert_info(E.s_invalid, string.format(
                "S framing on %s, segment index %d, message length %d", name, low, msg_len))
        end
        what = summary_s(name, msn, off, place, msg_len, zero_length)
    elseif op == ACKNOWLEDGE and not rtr then
        -- The low byte of an ACKNOWLEDGE's mbo_seg is an AETH syndrome.
        local si = sub:add(F.syndrome, r:range(11, 1))
        if NAK_NAMES[low] and is_message_opcode(off) then
            sub:add(F.nak, r:range(11, 1), true):set_generated()
            sub:add(F.nak_opcode, r:range(8, 3))
            si:add_proto_expert_info(E.nak, string.format("NAK %s for %s MSN %d",
                NAK_NAMES[low], opcode_names[off], msn))
        end
    elseif off == ZERO_LENGTH_MBO and is_message_opcode(op) and plen then
        if ZERO_LENGTH_OPCODES[op] and plen == 1 then
            sub:add(F.zero_length, r:range(8, 3), true):set_generated()
        else
            off_item:add_proto_expert_info(E.zero_length, string.format(
                "offset 0xFFFFFF on %s with %d payload bytes (needs a SEND or RDMA WRITE ONLY "
                .. "opcode and 1 pad byte)", opcode_names[op], plen))
        end
    end
    local icrc_item = nil
    if not s_data then
        icrc_item = sub:add(F.icrc, r:range(12, 4))
    end

    local version = band(flags, 0x03)
    local ts = band(flags, 0x04) ~= 0
    local more = band(flags, 0x08) ~= 0
    if version ~= 0 then
        ft:add_proto_expert_info(E.version, string.format("tcp_bth version %d", version))
    end
    what = what or summary(name, flags, op, msn, off, low, plen)
    sub:append_text(": " .. what)
    pinfo.cols.info:append(" [BTH " .. what .. "]")
    if not def then
        oi:add_proto_expert_info(E.opcode, string.format("Unknown tcp_bth opcode 0x%02x", op))
    else
        local expected = 16 + (ts and 8 or 0) + def[3]
        if olen ~= expected then
            sub:add_proto_expert_info(E.len, string.format(
                "tcp_bth option length %d, but T=%d and opcode %s call for %d",
                olen, ts and 1 or 0, def[1], expected))
        end
        local want_more = def[2] == "F" or def[2] == "M"
        if more ~= want_more then
            ft:add_proto_expert_info(E.more, string.format(
                "M=%d on %s", more and 1 or 0, def[1]))
        end
    end

    -- Timestamps only with T=1: a hello with T=0 (a SYN's, amendment 4) is 16 bytes and has
    -- none; its SYN carries the RFC 7323 option beside it (tcp.options.timestamp.tsval). An
    -- ACKNOWLEDGE must have them (the BTH form of a pure ACK replaces that option).
    local at = 16
    if ts and olen >= at + 8 then
        sub:add(F.tsval, r:range(at, 4))
        sub:add(F.tsecr, r:range(at + 4, 4))
        at = at + 8
    elseif op == 0xFF then
        sub:add(r:range(4, 1), "Timestamps: not in the hello (T=0): in the RFC 7323 option "
            .. "beside it (amendment 4)"):set_generated()
    elseif op == ACKNOWLEDGE then
        ft:add_proto_expert_info(E.ts_missing, string.format(
            "%s with T=0: the BTH form of a pure ACK must carry the timestamps", name))
    end
    local ext = def and def[3] or 0
    if ext == 4 and olen >= at + 4 then
        sub:add(F.imm, r:range(at, 4))
    elseif ext >= 12 and olen >= at + ext then
        sub:add(F.rkey, r:range(at, 4))
        sub:add(F.addr, r:range(at + 4, 8))
        if ext == 16 then
            sub:add(F.imm, r:range(at + 12, 4))
        end
    end

    -- ICRC: CRC32C over option bytes 4..11 (flags .. mbo_seg), then the extension (imm_data,
    -- rkey and address: amendment 2), then the payload. The timestamps are not covered.
    -- S-framed data has none (status 3, not applicable): the TCP checksum is its check.
    local status = 2
    if s_data then
        status = 3
    elseif payload and p.prefs.check_icrc then
        local crc = crc32c_update(0xFFFFFFFF, r:range(4, 8):bytes())
        if ext > 0 and olen >= at + ext then
            crc = crc32c_update(crc, r:range(at, ext):bytes())
        end
        crc = u32(bxor(crc32c_update(crc, payload), 0xFFFFFFFF))
        status = (crc == r:range(12, 4):uint()) and 1 or 0
        if status == 0 then
            icrc_item:add_proto_expert_info(E.icrc, string.format(
                "ICRC 0x%08x, payload calls for 0x%08x", r:range(12, 4):uint(), crc))
            icrc_item:append_text(" [incorrect]")
        else
            icrc_item:append_text(" [correct]")
        end
    end
    sub:add(F.icrc_status, status):set_generated()
end

local function is_set(v)
    return v == true or v == 1
end

function p.dissector(tvb, pinfo, tree)
    -- Every SYN's ISN, for the stream offsets of S-framed segments (only packets with one TCP
    -- header: an ICMP error quoting a TCP header is not a SYN of its stream).
    local seqs = { f_seq_raw() }
    local syns = { f_syn() }
    local streams = { f_stream() }
    local ports = { f_srcport() }
    local key = nil
    if #seqs == 1 and #syns == 1 and #streams == 1 and #ports == 1 then
        key = direction_key(pinfo, streams[1].value, ports[1].value)
        if is_set(syns[1].value) then
            note_syn(key, pinfo.number, seqs[1].value)
        end
    end

    local opts = { f_options() }
    if #opts == 0 then
        return
    end
    local hdr_lens = { f_hdr_len() }
    local lens = { f_len() }
    for i, fi in ipairs(opts) do
        local r = fi.range
        local bytes = r:bytes()
        local n = bytes:len()

        -- The payload for the ICRC, when the TCP header fields pair up with this option area
        -- and the capture holds every payload byte.
        local payload = nil
        local plen = nil
        if #hdr_lens == #opts and #lens == #opts then
            local src = fi.source
            plen = lens[i].value
            local poff = fi.offset - 20 + hdr_lens[i].value
            if plen == 0 then
                payload = ByteArray.new()
            elseif src and poff >= 0 and poff + plen <= src:len() then
                payload = src:range(poff, plen):bytes()
            end
        end

        -- Stream offset of the first payload byte, when this direction's SYN was seen.
        local stream_off = nil
        if key and #opts == 1 then
            local isn = isn_at(key, pinfo.number)
            if isn then
                stream_off = (seqs[1].value - isn - 1) % TWO32
            end
        end

        local at = 0
        while at < n do
            local kind = bytes:get_index(at)
            if kind == 0 then
                break -- EOL
            elseif kind == 1 then
                at = at + 1 -- NOP
            else
                if at + 1 >= n then
                    break
                end
                local olen = bytes:get_index(at + 1)
                if olen < 2 or at + olen > n then
                    break -- the TCP dissector reports bad option lengths itself
                end
                if kind == KIND and olen >= 4 and bytes:get_index(at + 2) == EXID_HI
                    and bytes:get_index(at + 3) == EXID_LO then
                    dissect_option(r:range(at, olen), olen, payload, plen, stream_off, pinfo,
                        tree)
                end
                at = at + olen
            end
        end
    end
end

register_postdissector(p)
