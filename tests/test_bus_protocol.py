"""Bus packets byte for byte against the protocol documents' worked examples.

Feetech: *Servo SCS Communication Protocol* (FT-SCS), section 4 (examples 1-8). ROBOTIS:
e-Manual *DYNAMIXEL Protocol 2.0*, Instruction Details (Ping, Read, Write, Sync Read, Sync
Write, Bulk Read examples). Beside them: checksum, CRC-16 table, byte stuffing and the stream
parsers, cross-checked against the vendors' own SDK code where it exposes the pieces.
"""

from __future__ import annotations

import numpy as np
import pytest

from neuract.bus import dxl2, scs, tables
from neuract.errors import ConfigError


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# ---------------------------------------------------------------- Feetech SCS / STS


def test_scs_ping_example_1():
    assert scs.ping(1) == h("FF FF 01 02 01 FB")
    assert scs.status(1) == h("FF FF 01 02 00 FC")


def test_scs_read_example_2():
    assert scs.read(1, 0x38, 2) == h("FF FF 01 04 02 38 02 BE")
    reply = scs.decode(h("FF FF 01 04 00 18 05 DD"))
    assert (reply.id, reply.code, reply.ok) == (1, 0, True)
    assert int.from_bytes(reply.params, "little") == 1304
    assert scs.status(1, 0, h("18 05")) == h("FF FF 01 04 00 18 05 DD")


def test_scs_write_examples_3_and_4():
    assert scs.write(scs.BROADCAST_ID, 0x05, b"\x01") == h("FF FF FE 04 03 05 01 F4")
    data = (2048).to_bytes(2, "little") + (0).to_bytes(2, "little") + (1000).to_bytes(2, "little")
    assert scs.write(1, 0x2A, data) == h("FF FF 01 09 03 2A 00 08 00 00 E8 03 D5")
    assert scs.instruction(scs.BROADCAST_ID, scs.ACTION) == h("FF FF FE 02 05 FA")


def test_scs_sync_write_example_7():
    data = h("00 08 00 00 E8 03")
    packet = scs.sync_write(0x2A, {i: data for i in (1, 2, 3, 4)})
    assert packet == h("FF FF FE 20 83 2A 06 01 00 08 00 00 E8 03 02 00 08 00 00 E8 03 "
                       "03 00 08 00 00 E8 03 04 00 08 00 00 E8 03 58")


def test_scs_sync_read_example_8():
    assert scs.sync_read(0x38, 8, [1, 2]) == h("FF FF FE 06 82 38 08 01 02 36")
    parser = scs.Parser()
    replies = parser.feed(h("FF FF 01 0A 00 00 08 00 00 00 00 79 1E 55 "
                            "FF FF 02 0A 00 FF 07 00 00 00 00 77 23 53"))
    assert [(p.id, p.ok) for p in replies] == [(1, True), (2, True)]
    t = tables.STS3215
    pos, volt, temp = t.f("present_position"), t.f("present_voltage"), t.f("present_temperature")
    got = [(tables.decode_value(p.params[0:2], pos), tables.decode_value(p.params[6:7], volt),
            tables.decode_value(p.params[7:8], temp)) for p in replies]
    assert got == [(2048, 0x79, 0x1E), (2047, 0x77, 0x23)]
    assert scs.status(2, 0, h("FF 07 00 00 00 00 77 23")) == replies[1].raw


def test_scs_checksum_and_parser():
    assert scs.checksum([0x01, 0x02, 0x01]) == 0xFB
    assert scs.checksum([0xFF] * 300) == ~(0xFF * 300) & 0xFF
    packet = scs.read(3, 56, 15)
    # garbage before, the packet split across feeds, a spare 0xFF before the header
    p = scs.Parser()
    assert p.feed(b"\x00\x13\xff" + packet[:5]) == []
    [got] = p.feed(packet[5:])
    assert (got.id, got.code, got.params, got.ok) == (3, scs.READ, bytes((56, 15)), True)
    bad = packet[:-1] + bytes((packet[-1] ^ 1,))
    [got] = scs.Parser().feed(bad + scs.ping(1))[:1]
    assert not got.ok
    assert [x.ok for x in scs.Parser().feed(bad + scs.ping(1))] == [False, True]


def test_scs_refuses_bad_ids_and_uneven_sync_writes():
    with pytest.raises(ConfigError, match="SCS servo id"):
        scs.ping(255)
    with pytest.raises(ConfigError, match="SCS servo id"):
        scs.status(scs.BROADCAST_ID)
    with pytest.raises(ConfigError, match="one length"):
        scs.sync_write(42, {1: b"\x00\x08", 2: b"\x00"})
    with pytest.raises(ConfigError, match="expected 1"):
        scs.decode(scs.ping(1) + scs.ping(2))


def test_scs_checksum_agrees_with_feetech_sdk():
    from scservo_sdk.protocol_packet_handler import protocol_packet_handler

    class Port:
        is_using = False
        sent = b""

        def clearPort(self):
            pass

        def writePort(self, packet):
            Port.sent = bytes(packet)
            return len(packet)

    rng = np.random.default_rng(0)
    for _ in range(50):
        sid = int(rng.integers(0, 254))
        params = bytes(rng.integers(0, 256, int(rng.integers(0, 40))).astype(np.uint8))
        tx = [0, 0, sid, len(params) + 2, scs.WRITE, *params, 0]
        protocol_packet_handler().txPacket(Port(), tx)
        assert Port.sent == scs.instruction(sid, scs.WRITE, params)


# ---------------------------------------------------------------- Dynamixel Protocol 2.0


def test_dxl2_ping_examples():
    assert dxl2.ping(1) == h("FF FF FD 00 01 03 00 01 19 4E")
    assert dxl2.ping(dxl2.BROADCAST_ID) == h("FF FF FD 00 FE 03 00 01 31 42")
    assert dxl2.status(1, 0, h("06 04 26")) == h("FF FF FD 00 01 07 00 55 00 06 04 26 65 5D")
    assert dxl2.status(2, 0, h("06 04 26")) == h("FF FF FD 00 02 07 00 55 00 06 04 26 6F 6D")
    reply = dxl2.decode(h("FF FF FD 00 01 07 00 55 00 06 04 26 65 5D"))
    assert (reply.id, reply.code, reply.error, reply.ok) == (1, dxl2.STATUS, 0, True)
    assert int.from_bytes(reply.params[:2], "little") == 1030 and reply.params[2] == 38


def test_dxl2_read_and_write_examples():
    assert dxl2.read(1, 132, 4) == h("FF FF FD 00 01 07 00 02 84 00 04 00 1D 15")
    assert dxl2.status(1, 0, (166).to_bytes(4, "little")) == h(
        "FF FF FD 00 01 08 00 55 00 A6 00 00 00 8C C0")
    assert dxl2.write(1, 116, (512).to_bytes(4, "little")) == h(
        "FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89")
    assert dxl2.status(1) == h("FF FF FD 00 01 04 00 55 00 A1 0C")
    inst = dxl2.decode(h("FF FF FD 00 01 09 00 03 74 00 00 02 00 00 CA 89"))
    assert (inst.code, inst.error, inst.params) == (dxl2.WRITE, None, h("74 00 00 02 00 00"))


def test_dxl2_sync_examples():
    assert dxl2.sync_read(132, 4, [1, 2]) == h("FF FF FD 00 FE 09 00 82 84 00 04 00 01 02 CE FA")
    assert dxl2.status(2, 0, (2079).to_bytes(4, "little")) == h(
        "FF FF FD 00 02 08 00 55 00 1F 08 00 00 BA BE")
    packet = dxl2.sync_write(116, {1: (150).to_bytes(4, "little"),
                                   2: (170).to_bytes(4, "little")})
    assert packet == h("FF FF FD 00 FE 11 00 83 74 00 04 00 01 96 00 00 00 02 AA 00 00 00 "
                       "82 87")
    # bulk read example's status packets: present voltage 119 (11.9 V), temperature 36 degC
    assert dxl2.status(1, 0, h("77 00")) == h("FF FF FD 00 01 06 00 55 00 77 00 C3 69")
    assert dxl2.status(2, 0, h("24")) == h("FF FF FD 00 02 05 00 55 00 24 8B A9")


def test_dxl2_crc_table_is_robotis():
    from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

    ph = Protocol2PacketHandler()
    for i in range(256):  # the SDK's table, one byte at a time from crc 0
        assert dxl2.CRC_TABLE[i] == ph.updateCRC(0, [i], 1)
    assert dxl2.CRC_TABLE[:4] == [0x0000, 0x8005, 0x800F, 0x000A]
    assert dxl2.crc16(h("FF FF FD 00 01 03 00 01")) == 0x4E19
    rng = np.random.default_rng(1)
    data = list(rng.integers(0, 256, 500))
    assert dxl2.crc16(data) == ph.updateCRC(0, data, len(data))


@pytest.mark.parametrize("params", [
    h("FF FF FD"), h("FF FF FD FD"), h("01 FF FF FD FF FF FD 02"), h("FF FF FF FD 00"),
    h("FD FF FF"), b"",
])
def test_dxl2_stuffing_round_trip(params):
    from dynamixel_sdk.protocol2_packet_handler import Protocol2PacketHandler

    body = bytes((dxl2.WRITE,)) + params
    wire = dxl2.stuff(body)
    assert dxl2.unstuff(wire) == body
    assert wire.count(b"\xff\xff\xfd") == wire.count(b"\xff\xff\xfd\xfd")  # no header inside
    packet = dxl2.instruction(5, dxl2.WRITE, params)
    assert int.from_bytes(packet[5:7], "little") == len(wire) + 2
    got = dxl2.decode(packet)
    assert (got.ok, got.params) == (True, params)
    # the SDK's own stuffing gives the same length and bytes
    raw = [0xFF, 0xFF, 0xFD, 0x00, 5, (len(body) + 2) & 0xFF, (len(body) + 2) >> 8,
           *body, 0, 0]
    sdk = Protocol2PacketHandler().addStuffing(raw)
    assert bytes(sdk[7:7 + len(wire)]) == wire


def test_dxl2_stuffing_random_round_trip():
    rng = np.random.default_rng(2)
    for _ in range(300):
        body = bytes(rng.choice([0x00, 0xFD, 0xFF, 0x12], int(rng.integers(1, 30))).tolist())
        assert dxl2.unstuff(dxl2.stuff(body)) == body
        packet = dxl2.status(3, 0, body)
        got = dxl2.Parser().feed(b"\xff\xfd" + packet)  # garbage first
        assert [(p.ok, p.params) for p in got] == [(True, body)]


def test_dxl2_parser_crc_and_streams():
    packet = dxl2.read(2, 124, 23)
    p = dxl2.Parser()
    assert p.feed(packet[:6]) == []
    [got] = p.feed(packet[6:])
    assert (got.id, got.code, got.params, got.ok) == (2, dxl2.READ, h("7C 00 17 00"), True)
    bad = packet[:-2] + bytes((packet[-2] ^ 0xFF,)) + packet[-1:]
    assert [x.ok for x in dxl2.Parser().feed(bad + dxl2.ping(1))] == [False, True]
    with pytest.raises(ConfigError, match="Dynamixel id"):
        dxl2.ping(253)
    with pytest.raises(ConfigError, match="one length"):
        dxl2.sync_write(116, {1: b"\x00" * 4, 2: b"\x00" * 2})


# ---------------------------------------------------------------- control tables


@pytest.mark.parametrize("enc,size,values", [
    ("u", 2, [0, 1, 4095, 65535]), ("s", 4, [0, -1, 2**31 - 1, -(2**31), 123456]),
    ("s", 2, [-32768, -5, 32767]), ("sm15", 2, [0, 50, -50, 32767, -32767]),
    ("sm10", 2, [0, 1000, -1000, -1023]),
])
def test_register_encodings_round_trip(enc, size, values):
    f = tables.Field(0, size, enc)
    for v in values:
        assert tables.decode_value(tables.encode_value(v, f), f) == v
    assert tables.encode_value(-50, tables.Field(0, 2, "sm15")) == bytes((50, 0x80))
    assert tables.encode_value(-100, tables.Field(0, 2, "sm10")) == (100 | 1024).to_bytes(2,
                                                                                         "little")


def test_tables_addresses_are_the_documented_ones():
    sts, xm = tables.STS3215, tables.XM430
    assert {k: sts.f(k).address for k in ("present_position", "present_velocity",
                                          "present_load", "present_voltage",
                                          "present_temperature", "goal_position",
                                          "torque_enable", "present_current")} == {
        "present_position": 56, "present_velocity": 58, "present_load": 60,
        "present_voltage": 62, "present_temperature": 63, "goal_position": 42,
        "torque_enable": 40, "present_current": 69}
    assert {k: xm.f(k).address for k in ("present_position", "present_velocity",
                                         "present_current", "present_voltage",
                                         "present_temperature", "goal_position",
                                         "torque_enable", "hardware_error")} == {
        "present_position": 132, "present_velocity": 128, "present_current": 126,
        "present_voltage": 144, "present_temperature": 146, "goal_position": 116,
        "torque_enable": 64, "hardware_error": 70}
    for t in (sts, xm):  # the telemetry block holds every present register
        start, length = t.telemetry
        for name, f in t.fields.items():
            if name.startswith("present_"):
                assert start <= f.address and f.address + f.size <= start + length, name


@pytest.mark.parametrize("table", [tables.STS3215, tables.XM430])
def test_telemetry_quantisation_round_trip(table):
    tele = {"q": 0.3, "qd": -1.2, "current": 0.4, "voltage": 12.1, "temperature": 33.0,
            "load": -0.25, "pwm": 0.25}
    got = tables.quantised(table, tele)
    assert abs(got["q"] - 0.3) <= tables.RAD_PER_STEP / 2
    assert abs(got["voltage"] - 12.1) < 1e-9 and got["temperature"] == 33.0
    effort = "load" if table is tables.STS3215 else "pwm"
    assert abs(got[effort] - tele[effort]) <= 1 / 885
    assert tables.quantised(table, got) == got  # idempotent
    assert tables.goal_from_counts(table, tables.goal_counts(table, 0.3)) == pytest.approx(
        got["q"])
    with pytest.raises(ConfigError, match="telemetry block"):
        tables.decode_telemetry(table, b"\x00")
