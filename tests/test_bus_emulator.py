"""The emulated bus through the vendors' SDKs (scservo_sdk, dynamixel_sdk) on its pty: ping,
reads, the telemetry block by sync read, goals by sync write moving the twin's arm, the
twin's ground truth, and every fault's observable result in the SDK's result codes."""

from __future__ import annotations

import time

import dynamixel_sdk as dxl
import numpy as np
import pytest
import scservo_sdk as scs_sdk
import serial

from neuract.bus import BusClient, BusEmulator, FaultSpec, ServoFault, dxl2, scs, tables
from neuract.errors import ConfigError
from neuract.twin.generate import unit_rng
from neuract.twin.servo import sample_unit

LATENCY_MS = 50.0
"""the SDKs' LATENCY_TIMER for these tests (16 ms by default: a 34 ms reply timeout, tight on
a loaded machine); replies time out after 2 * 50 + 2 ms plus their wire time"""


@pytest.fixture(autouse=True)
def _sdk_timeouts(monkeypatch):
    monkeypatch.setattr(scs_sdk.port_handler, "LATENCY_TIMER", LATENCY_MS)
    monkeypatch.setattr(dxl.port_handler, "LATENCY_TIMER", LATENCY_MS)


def _emu(robot: str = "so101", **kw) -> BusEmulator:
    kw.setdefault("clock", "virtual")
    kw.setdefault("duration_s", 4.0)
    return BusEmulator(robot=robot, **kw).start()


class _Sts:
    """scservo_sdk on the emulator's port (STS3215: little-endian, PacketHandler(0))."""

    def __init__(self, emu: BusEmulator):
        self.port = scs_sdk.PortHandler(emu.port)
        self.ph = scs_sdk.PacketHandler(0)
        assert self.port.openPort() and self.port.setBaudRate(1_000_000)

    def close(self):
        self.port.closePort()


class _Dxl:
    """dynamixel_sdk (Protocol 2.0) on the emulator's port."""

    def __init__(self, emu: BusEmulator):
        self.port = dxl.PortHandler(emu.port)
        self.ph = dxl.PacketHandler(2.0)
        assert self.port.openPort() and self.port.setBaudRate(1_000_000)

    def close(self):
        self.port.closePort()


@pytest.fixture
def sts():
    emu = _emu("so101")
    sdk = _Sts(emu)
    yield emu, sdk
    sdk.close()
    emu.close()


@pytest.fixture
def omx():
    emu = _emu("omx")
    sdk = _Dxl(emu)
    yield emu, sdk
    sdk.close()
    emu.close()


def _sync_read(group_cls, sdk, table, ids):
    start, length = table.telemetry
    group = group_cls(sdk.port, sdk.ph, start, length)
    for i in ids:
        assert group.addParam(i)
    return group


def _block(group, table, sid) -> dict[str, float]:
    start, length = table.telemetry
    raw = bytes(group.getData(sid, start + k, 1) for k in range(length))
    return tables.decode_telemetry(table, raw)


# ---------------------------------------------------------------- normal traffic


def test_sts_ping_read_and_telemetry_block(sts):
    emu, sdk = sts
    model, res, err = sdk.ph.ping(sdk.port, 1)
    assert (model, res, err) == (777, scs_sdk.COMM_SUCCESS, 0)
    pos, res, err = sdk.ph.read2ByteTxRx(sdk.port, 4, 56)
    assert res == scs_sdk.COMM_SUCCESS and pos == emu.register(4, "present_position")
    group = _sync_read(scs_sdk.GroupSyncRead, sdk, tables.STS3215, emu.ids)
    assert group.txRxPacket() == scs_sdk.COMM_SUCCESS
    ex = emu.log[-1]
    assert ex.instruction == scs.SYNC_READ and set(ex.outcome.values()) == {"ok"}
    expect = emu.telemetry(ex.step)  # what the twin's servos read at that physics step
    truth = emu.truth()
    for j, sid in enumerate(emu.ids):
        got = _block(group, tables.STS3215, sid)
        for ch in ("q", "qd", "load", "current", "voltage", "temperature"):
            assert got[ch] == pytest.approx(expect[ch][j], abs=1e-12), (sid, ch)
        assert abs(got["q"] - truth["q_enc"][ex.step, j]) <= tables.RAD_PER_STEP / 2 + 1e-12
        assert got["error"] == 0
    assert 10.0 < expect["voltage"].mean() < 13.0 and 15.0 < expect["temperature"].mean() < 60


def test_sts_sync_write_moves_the_arm(sts):
    emu, sdk = sts
    group = _sync_read(scs_sdk.GroupSyncRead, sdk, tables.STS3215, emu.ids)
    assert group.txRxPacket() == scs_sdk.COMM_SUCCESS
    q_home = np.array([_block(group, tables.STS3215, sid)["q"] for sid in emu.ids])
    target = q_home + np.array([0.3, -0.2, 0.25, -0.3, 0.4, 0.0])
    write = scs_sdk.GroupSyncWrite(sdk.port, sdk.ph, 42, 2)
    for sid, q in zip(emu.ids, target):
        assert write.addParam(sid, list(tables.goal_counts(tables.STS3215, q)))
    assert write.txPacket() == scs_sdk.COMM_SUCCESS
    emu.advance(1.5)
    step0 = emu.log[-1].step
    assert emu.log[-1].instruction == scs.SYNC_WRITE
    assert group.txRxPacket() == scs_sdk.COMM_SUCCESS
    q_now = np.array([_block(group, tables.STS3215, sid)["q"] for sid in emu.ids])
    assert np.abs(q_now - target).max() < 0.06, q_now - target
    assert np.abs(q_now - q_home)[:5].min() > 0.15
    truth = emu.truth()
    goal = np.round(target / tables.RAD_PER_STEP) * tables.RAD_PER_STEP
    np.testing.assert_allclose(truth["q_goal"][step0 + 1:], np.broadcast_to(
        goal, truth["q_goal"][step0 + 1:].shape), atol=1e-12)
    np.testing.assert_allclose(truth["q_goal"][0], q_home, atol=tables.RAD_PER_STEP)
    assert np.abs(truth["q"][-1] - target).max() < 0.06
    last = emu.log[-1].step  # the physics step the last sync read was served at
    assert len(truth["t"]) > last and truth["t"][last] == pytest.approx(last * emu.dt)
    assert last * emu.dt <= emu.log[-1].t < (last + 1) * emu.dt


def test_dxl_ping_read_sync_read_and_sync_write(omx):
    emu, sdk = omx
    assert sdk.ph.ping(sdk.port, 3) == (1020, dxl.COMM_SUCCESS, 0)
    pos, res, err = sdk.ph.read4ByteTxRx(sdk.port, 2, 132)
    assert (res, err) == (dxl.COMM_SUCCESS, 0) and pos == emu.register(2, "present_position")
    group = _sync_read(dxl.GroupSyncRead, sdk, tables.XM430, emu.ids)
    assert group.txRxPacket() == dxl.COMM_SUCCESS
    ex = emu.log[-1]
    expect = emu.telemetry(ex.step)
    for j, sid in enumerate(emu.ids):
        got = _block(group, tables.XM430, sid)
        for ch in ("q", "qd", "pwm", "current", "voltage", "temperature"):
            assert got[ch] == pytest.approx(expect[ch][j], abs=1e-12), (sid, ch)
    q0 = np.array([expect["q"][j] for j in range(emu.n)])
    target = q0 + np.array([0.4, 0.2, -0.2, 0.3])
    write = dxl.GroupSyncWrite(sdk.port, sdk.ph, 116, 4)
    for sid, q in zip(emu.ids, target):
        write.addParam(sid, list(tables.goal_counts(tables.XM430, q)))
    assert write.txPacket() == dxl.COMM_SUCCESS
    emu.advance(1.5)
    assert group.txRxPacket() == dxl.COMM_SUCCESS
    q_now = np.array([_block(group, tables.XM430, sid)["q"] for sid in emu.ids])
    assert np.abs(q_now - target).max() < 0.06, q_now - target
    assert emu.register(1, "goal_position") == tables.position_counts(target[0])


def test_dxl_write_read_back_with_byte_stuffing(omx):
    emu, sdk = omx
    value = 0x00FDFFFF  # FF FF FD 00 on the wire: the status packet must be stuffed
    assert sdk.ph.write4ByteTxRx(sdk.port, 1, 224, value) == (dxl.COMM_SUCCESS, 0)
    got, res, err = sdk.ph.read4ByteTxRx(sdk.port, 1, 224)
    assert (got, res, err) == (value, dxl.COMM_SUCCESS, 0)
    assert b"\xff\xff\xfd\xfd" in dxl2.status(1, 0, value.to_bytes(4, "little"))
    # a read-only register is refused with an Access error, the ID cannot change
    res, err = sdk.ph.write4ByteTxRx(sdk.port, 1, 132, 5)
    assert res == dxl.COMM_SUCCESS and err == dxl2.ERR_ACCESS
    res, err = sdk.ph.write1ByteTxRx(sdk.port, 1, 7, 9)
    assert err == dxl2.ERR_ACCESS and emu.register(1, "id") == 1


def test_pyserial_with_the_packet_builders():
    with BusEmulator(robot="so101", clock="virtual", duration_s=1.0, ids=[11, 12, 13, 14, 15,
                                                                          16]) as emu:
        with serial.Serial(emu.port, 1_000_000, timeout=0.5) as port:
            port.reset_input_buffer()
            port.write(scs.read(13, 56, 2))
            reply = scs.decode(port.read(8))
            assert reply.ok and reply.id == 13
            assert int.from_bytes(reply.params, "little") == emu.register(13, "present_position")
            port.timeout = 0.1
            port.write(scs.ping(1))  # no such servo: silence
            assert port.read(6) == b""


def test_virtual_clock_is_deterministic_and_the_unit_is_the_twins():
    def session(seed):
        with BusEmulator(robot="so101", clock="virtual", duration_s=2.0, seed=seed) as emu:
            sdk = _Sts(emu)
            try:
                write = scs_sdk.GroupSyncWrite(sdk.port, sdk.ph, 42, 2)
                for sid in emu.ids:
                    write.addParam(sid, list(tables.goal_counts(tables.STS3215, 0.5)))
                write.txPacket()
                emu.advance(0.7)
                group = _sync_read(scs_sdk.GroupSyncRead, sdk, tables.STS3215, emu.ids)
                assert group.txRxPacket() == scs_sdk.COMM_SUCCESS
                blocks = [_block(group, tables.STS3215, sid) for sid in emu.ids]
                return blocks, emu.truth()["tau"], emu.params
            finally:
                sdk.close()

    a, tau_a, params_a = session(3)
    b, tau_b, _ = session(3)
    c, tau_c, _ = session(4)
    assert a == b and np.array_equal(tau_a, tau_b)
    assert not np.array_equal(tau_a, tau_c)
    expect, _ = sample_unit(BusEmulator(robot="so101", duration_s=0.2, seed=3).spec, 6,
                            unit_rng(3, 0))
    np.testing.assert_array_equal(params_a.ke, expect.ke)  # unit 0 of seed 3, as the twin


def test_wall_clock_runs_the_physics_in_the_background():
    with BusEmulator(robot="omx", clock="wall", duration_s=3.0) as emu:
        time.sleep(0.4)
        k = len(emu.truth()["t"])
        assert 0.3 / emu.dt < k <= emu.t / emu.dt + 2
        assert 0.35 < emu.t < 5.0
        with pytest.raises(ConfigError, match="virtual"):
            emu.advance(0.1)


def test_payload_shows_in_the_truth_and_the_session_ends():
    with BusEmulator(robot="so101", clock="virtual", duration_s=0.5, payload_kg=0.3) as emu:
        emu.advance(0.2)
        truth = emu.truth()
        assert truth["ee_force"][:, 2] == pytest.approx(-0.3 * 9.81)
        assert truth["contact"].all() and truth["payload"][0] == 0.3
        assert not emu.finished
        emu.advance(1.0)
        assert emu.finished
        sdk = _Sts(emu)
        try:
            assert sdk.ph.ping(sdk.port, 1)[1] == scs_sdk.COMM_RX_TIMEOUT
        finally:
            sdk.close()
        assert emu.log[-1].outcome == {-1: "finished"}


def test_bad_configuration_is_refused():
    with pytest.raises(ConfigError, match="speak 'dxl2'"):
        BusEmulator(protocol="scs", robot="omx")
    with pytest.raises(ConfigError, match="distinct"):
        BusEmulator(robot="omx", ids=[1, 1, 2, 3])
    with pytest.raises(ConfigError, match="clock"):
        BusEmulator(clock="sundial")
    with pytest.raises(ConfigError, match="FaultSpec.drop"):
        BusEmulator(faults=FaultSpec(drop=1.5))
    with pytest.raises(ConfigError, match="FaultSpec.errors"):
        BusEmulator(faults=FaultSpec(errors=(ServoFault(9, 0.0, "overload"),)))
    with pytest.raises(ConfigError, match="FaultSpec.vanish"):
        BusEmulator(faults=FaultSpec(vanish={42: 1.0}))
    with pytest.raises(ConfigError, match="6 finite joint angles"):
        BusEmulator(q0=[0.0, 1.0])
    with pytest.raises(ConfigError, match="30 minutes"):
        BusEmulator(duration_s=3600.0)


# ---------------------------------------------------------------- faults


def test_dropped_packets_are_never_acted_on():
    with _emu("so101", faults=FaultSpec(drop=1.0)) as emu:
        sdk = _Sts(emu)
        try:
            assert sdk.ph.ping(sdk.port, 1)[1] == scs_sdk.COMM_RX_TIMEOUT
            before = emu.register(2, "goal_position")
            res, _ = sdk.ph.write2ByteTxRx(sdk.port, 2, 42, before + 300)
            assert res == scs_sdk.COMM_RX_TIMEOUT
            assert emu.register(2, "goal_position") == before
            assert [e.outcome for e in emu.log] == [{-1: "dropped"}] * 2
        finally:
            sdk.close()


def test_corrupt_status_packets_fail_the_checksum_and_crc():
    with _emu("so101", faults=FaultSpec(corrupt=1.0)) as emu:
        sdk = _Sts(emu)
        try:
            _, res, _ = sdk.ph.read2ByteTxRx(sdk.port, 1, 56)
            assert res == scs_sdk.COMM_RX_CORRUPT
        finally:
            sdk.close()
    with _emu("omx", faults=FaultSpec(corrupt=1.0)) as emu:
        sdk = _Dxl(emu)
        try:
            _, res, _ = sdk.ph.read4ByteTxRx(sdk.port, 1, 132)
            assert res == dxl.COMM_RX_CORRUPT
            assert emu.log[-1].outcome == {1: "corrupt"}
        finally:
            sdk.close()


def test_timeouts_act_but_do_not_answer():
    with _emu("omx", faults=FaultSpec(timeout=1.0)) as emu:
        sdk = _Dxl(emu)
        try:
            t0 = time.monotonic()
            res, _ = sdk.ph.write4ByteTxRx(sdk.port, 3, 116, 2300)
            assert res == dxl.COMM_RX_TIMEOUT
            assert time.monotonic() - t0 >= 2 * LATENCY_MS / 1000
            assert emu.register(3, "goal_position") == 2300  # the servo acted
            assert emu.log[-1].outcome == {3: "timeout"}
        finally:
            sdk.close()


def test_a_servo_that_vanishes():
    with _emu("so101", faults=FaultSpec(vanish={3: 0.5})) as emu:
        sdk = _Sts(emu)
        try:
            assert sdk.ph.ping(sdk.port, 3)[1] == scs_sdk.COMM_SUCCESS
            emu.advance(0.6)
            assert sdk.ph.ping(sdk.port, 3)[1] == scs_sdk.COMM_RX_TIMEOUT
            assert sdk.ph.ping(sdk.port, 2)[1] == scs_sdk.COMM_SUCCESS
            group = _sync_read(scs_sdk.GroupSyncRead, sdk, tables.STS3215, emu.ids)
            assert group.txRxPacket() == scs_sdk.COMM_RX_TIMEOUT
            assert emu.log[-1].outcome[3] == "vanished"
            assert all(emu.log[-1].outcome[i] == "ok" for i in emu.ids if i != 3)
            # the others still answer and take goals; servo 3 takes none
            before = emu.register(3, "goal_position")
            write = scs_sdk.GroupSyncWrite(sdk.port, sdk.ph, 42, 2)
            for sid in emu.ids:
                write.addParam(sid, [0x10, 0x08])
            write.txPacket()
            assert emu.wait_idle()
            assert emu.register(3, "goal_position") == before
            assert emu.register(2, "goal_position") == 0x0810
        finally:
            sdk.close()


def test_sts_error_bits_overload_and_overheat():
    faults = FaultSpec(errors=(ServoFault(2, 0.3, "overload"), ServoFault(5, 0.3, "voltage")))
    with _emu("so101", faults=faults) as emu:
        sdk = _Sts(emu)
        try:
            assert sdk.ph.ping(sdk.port, 2) == (777, scs_sdk.COMM_SUCCESS, 0)
            emu.advance(0.4)
            _, res, err = sdk.ph.ping(sdk.port, 2)
            assert res == scs_sdk.COMM_SUCCESS and err & scs.ERR_OVERLOAD
            assert "Overload" in sdk.ph.getRxPacketError(err)
            assert sdk.ph.ping(sdk.port, 5)[2] == scs.ERR_VOLTAGE
            assert sdk.ph.ping(sdk.port, 1)[2] == 0
            assert emu.run.prot.limit[0, 1] == 0.0  # unloaded: torque off
            assert emu.run.prot.limit[0, 4] == 1.0  # a voltage error does not unload
            status, res, _ = sdk.ph.read1ByteTxRx(sdk.port, 2, 65)
            assert status & scs.ERR_OVERLOAD
            # torque enable re-arms the servo
            assert sdk.ph.write1ByteTxRx(sdk.port, 2, 40, 1) == (scs_sdk.COMM_SUCCESS, 0)
            assert emu.run.prot.limit[0, 1] == 1.0
        finally:
            sdk.close()


def test_dxl_error_bits_alert_and_reboot():
    faults = FaultSpec(errors=(ServoFault(4, 0.2, "overheat"),))
    with _emu("omx", faults=faults) as emu:
        sdk = _Dxl(emu)
        try:
            emu.advance(0.3)
            _, res, err = sdk.ph.ping(sdk.port, 4)
            assert res == dxl.COMM_SUCCESS and err == dxl2.ERR_ALERT
            assert "Hardware error" in sdk.ph.getRxPacketError(err)
            hw, res, _ = sdk.ph.read1ByteTxRx(sdk.port, 4, 70)
            assert hw == 0x04  # Overheating Error
            assert emu.register(4, "torque_enable") == 0
            assert sdk.ph.write1ByteTxRx(sdk.port, 4, 64, 1)[0] == dxl.COMM_SUCCESS
            assert emu.register(4, "torque_enable") == 0  # shut down until a reboot
            assert sdk.ph.reboot(sdk.port, 4) == (dxl.COMM_SUCCESS, 0)
            assert sdk.ph.ping(sdk.port, 4)[2] == 0
            assert sdk.ph.write1ByteTxRx(sdk.port, 4, 64, 1) == (dxl.COMM_SUCCESS, 0)
            assert emu.register(4, "torque_enable") == 1 and emu.run.prot.limit[0, 3] == 1.0
        finally:
            sdk.close()


def test_slow_bus_delays_and_then_times_out():
    with _emu("so101", faults=FaultSpec(byte_delay_s=0.004)) as emu:
        sdk = _Sts(emu)
        try:
            t0 = time.monotonic()
            _, res, _ = sdk.ph.read2ByteTxRx(sdk.port, 1, 56)
            dt = time.monotonic() - t0
            assert res == scs_sdk.COMM_SUCCESS and dt >= 8 * 0.004
            assert emu.log[-1].t_done - emu.log[-1].t >= 8 * 0.004  # virtual time too
        finally:
            sdk.close()
    with _emu("omx", faults=FaultSpec(byte_delay_s=0.15)) as emu:
        sdk = _Dxl(emu)
        try:
            _, res, _ = sdk.ph.ping(sdk.port, 1)
            assert res in (dxl.COMM_RX_TIMEOUT, dxl.COMM_RX_CORRUPT)
        finally:
            sdk.close()


# ---------------------------------------------------------------- neuract's own bus host


@pytest.mark.parametrize("robot", ["so101", "omx"])
def test_client_reads_every_servo_on_its_own(robot):
    table = tables.table_for(robot)
    faults = FaultSpec(vanish={2: 0.0})
    with _emu(robot, faults=faults) as emu, BusClient(emu.port, emu.protocol,
                                                       timeout_s=0.1) as bus:
        ping = bus.ping(1)
        assert ping.ok and ping.error == 0
        if robot == "omx":
            assert int.from_bytes(ping.params[:2], "little") == 1020
        assert bus.ping(2).status == "timeout"
        start, length = table.telemetry
        replies = bus.sync_read(start, length, emu.ids)
        step = emu.log[-1].step
        expect = emu.telemetry(step)
        assert replies[2].status == "timeout"
        for j, sid in enumerate(emu.ids):
            if sid == 2:
                continue
            assert replies[sid].ok, replies[sid]
            got = tables.decode_telemetry(table, replies[sid].params)
            assert got["q"] == pytest.approx(expect["q"][j], abs=1e-12)
            assert got["temperature"] == expect["temperature"][j]
        goal = tables.goal_counts(table, 0.2)
        bus.sync_write(table.f("goal_position").address, {sid: goal for sid in emu.ids})
        assert emu.wait_idle()
        assert emu.register(3, "goal_position") == tables.position_counts(0.2)
        reply = bus.write(1, table.f("goal_position").address, tables.goal_counts(table, -0.1))
        assert reply.ok and emu.register(1, "goal_position") == tables.position_counts(-0.1)


def test_client_reports_corrupt_status_packets():
    with _emu("omx", faults=FaultSpec(corrupt=1.0)) as emu, BusClient(
            emu.port, "dxl2", timeout_s=0.1) as bus:
        replies = bus.sync_read(132, 4, emu.ids)
        assert {r.status for r in replies.values()} == {"corrupt"}
        assert bus.read(1, 132, 4).status == "corrupt"


def test_a_live_recording_matches_the_ground_truth():
    """What ``neuract record`` does against the emulator: on the wall clock, a sine of goals
    out and the telemetry block in at ~50 Hz; every sample is then the twin's telemetry at the
    physics step the emulator served it from, and the arm followed the goals."""
    table = tables.STS3215
    start, length = table.telemetry
    samples = []
    with BusEmulator(robot="so101", clock="wall", duration_s=5.0) as emu, BusClient(
            emu.port, "scs", timeout_s=0.1) as bus:
        t0 = time.monotonic()
        while time.monotonic() - t0 < 1.2:
            t = time.monotonic() - t0
            q_goal = 0.4 * np.sin(2 * np.pi * 0.8 * t)
            bus.sync_write(table.f("goal_position").address,
                           {sid: tables.goal_counts(table, q_goal) for sid in emu.ids[:1]})
            replies = bus.sync_read(start, length, emu.ids)
            if all(r.ok for r in replies.values()):
                samples.append(np.array([tables.decode_telemetry(table, replies[sid].params)["q"]
                                         for sid in emu.ids]))
            time.sleep(0.02)
        assert emu.wait_idle()
        reads = [ex for ex in emu.log if ex.instruction == scs.SYNC_READ]
        assert len(samples) == len(reads) > 25
        for q, ex in zip(samples, reads):
            np.testing.assert_allclose(q, emu.telemetry(ex.step)["q"], atol=1e-12)
        truth = emu.truth()
    steps = np.array([ex.step for ex in reads])
    assert np.all(np.diff(steps) > 0)  # emulated time ran on with the wall clock
    q_goal, q = truth["q_goal"][steps, 0], truth["q"][steps, 0]
    assert np.ptp(q_goal) > 0.5 and np.ptp(q) > 0.4
    assert np.abs(q - q_goal)[len(steps) // 3:].max() < 0.25  # the base joint followed
