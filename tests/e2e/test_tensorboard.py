"""metrics.tensorboard (NOTE [TensorBoard events]) read back by an independent parser: the TFRecord
framing with both masked CRC-32Cs checked, the Event and Summary protobuf fields decoded by hand,
and every scalar of every event equal (as float32) to the metrics.jsonl line of its step, the
step's phases (NOTE [Step anatomy]) among them."""
import glob
import os
import shutil
import struct
import tempfile
import unittest

from common import TINY_GPT, metrics_lines, run, write_config


def crc32c(data):
    """CRC-32C (Castagnoli), bit by bit: no table shared with the writer."""
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(crc):
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def records(path):
    """The data of each TFRecord of `path`, both CRCs checked."""
    with open(path, "rb") as f:
        blob = f.read()
    out, at = [], 0
    while at < len(blob):
        header = blob[at:at + 8]
        (length,) = struct.unpack("<Q", header)
        (length_crc,) = struct.unpack("<I", blob[at + 8:at + 12])
        assert length_crc == masked(crc32c(header)), f"length CRC at byte {at}"
        data = blob[at + 12:at + 12 + length]
        (data_crc,) = struct.unpack("<I", blob[at + 12 + length:at + 16 + length])
        assert data_crc == masked(crc32c(data)), f"data CRC at byte {at}"
        out.append(data)
        at += 16 + length
    return out


def fields(message):
    """(field number, wire type, value) of a protobuf message: varints as ints, fixed64 and
    fixed32 as raw bytes, length-delimited as bytes."""
    out, at = [], 0

    def varint():
        nonlocal at
        value, shift = 0, 0
        while True:
            b = message[at]
            at += 1
            value |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return value

    while at < len(message):
        key = varint()
        number, wire = key >> 3, key & 7
        if wire == 0:
            out.append((number, wire, varint()))
        elif wire == 1:
            out.append((number, wire, message[at:at + 8]))
            at += 8
        elif wire == 5:
            out.append((number, wire, message[at:at + 4]))
            at += 4
        elif wire == 2:
            n = varint()
            out.append((number, wire, message[at:at + n]))
            at += n
        else:
            raise AssertionError(f"wire type {wire}")
    return out


def event(data):
    """{"wall_time", "step", "file_version", "scalars": {tag: value}} of an Event."""
    out = {"scalars": {}}
    for number, wire, value in fields(data):
        if number == 1 and wire == 1:
            out["wall_time"] = struct.unpack("<d", value)[0]
        elif number == 2 and wire == 0:
            out["step"] = value
        elif number == 3 and wire == 2:
            out["file_version"] = value.decode()
        elif number == 5 and wire == 2:
            for vn, vw, v in fields(value):
                assert (vn, vw) == (1, 2), (vn, vw)
                parts = {n: x for n, _, x in fields(v)}
                out["scalars"][parts[1].decode()] = struct.unpack("<f", parts[2])[0]
    return out


def as_float32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


class TensorBoard(unittest.TestCase):
    def setUp(self):
        self.folder = tempfile.mkdtemp(prefix="vescale-tensorboard-")

    def tearDown(self):
        shutil.rmtree(self.folder, ignore_errors=True)

    def test_events_hold_every_metrics_line(self):
        config = write_config(self.folder, TINY_GPT + "[training]\nsteps = 6\nseq_len = 16\n")
        dump = os.path.join(self.folder, "run")
        result = run("train", config, f"--job.dump_folder={dump}", "--parallel.dp=2",
                     "--metrics.log_interval=2", "--eval.interval=3",
                     "--metrics.tensorboard=true")
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])
        files = glob.glob(os.path.join(dump, "events.out.tfevents.*"))
        self.assertEqual(len(files), 1, os.listdir(dump))
        events = [event(r) for r in records(files[0])]
        self.assertEqual(events[0].get("file_version"), "brain.Event:2")
        by_step = {e["step"]: e for e in events[1:]}
        lines = metrics_lines(dump)
        self.assertEqual(sorted(by_step), [m["step"] for m in lines])
        checked = 0
        for m in lines:
            expected = {k: m[k] for k in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu",
                                          "step_time_s", "mem_bytes", "checkpoint_stall_s")}
            if "val_loss" in m:
                expected["val_loss"] = m["val_loss"]
            expected.update({f"state_bytes/{k}": v for k, v in m["state_bytes"].items()})
            expected.update({f"comm_bytes/{k}": v for k, v in m["comm_bytes"].items()})
            expected.update({f"time_s/{k}": v for k, v in m["time_s"].items()})
            expected.update({f"comm_wait_s/{k}": v for k, v in m["comm_wait_s"].items()})
            self.assertEqual(by_step[m["step"]]["scalars"],
                             {k: as_float32(v) for k, v in expected.items()}, m["step"])
            checked += len(expected)
            # NOTE [Step anatomy]: the phases and "other" are the step's time; dp=2 waits on dp.
            self.assertAlmostEqual(sum(m["time_s"].values()), m["step_time_s"], delta=1e-9)
            self.assertGreater(m["time_s"]["forward"], 0)
            self.assertGreater(m["time_s"]["backward"], 0)
            self.assertIn("dp", m["comm_wait_s"])
        print(f"\n{len(events)} events in {os.path.basename(files[0])}, {checked} scalars equal to "
              f"metrics.jsonl (as float32), e.g. step {lines[-1]['step']}: "
              f"{sorted(by_step[lines[-1]['step']]['scalars'])}")


if __name__ == "__main__":
    unittest.main()
