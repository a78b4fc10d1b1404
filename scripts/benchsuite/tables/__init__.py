"""One module per table (or family of tables); TABLES maps each BENCH name to its function of a
Context, which prints the table."""
from benchsuite.tables import (checkpoint, comm, cp, export, flight, fused, generate, jsonl, lora,
                               moe, muon, optimizer, peers, pipeline, prepare, recompute, train,
                               zero)

TABLES = {
    "comm": comm.run, "peers": peers.run, "peer-threads": peers.run_threads, "train": train.run,
    "pipeline": pipeline.run, "zero": zero.run, "checkpoint": checkpoint.run, "export": export.run,
    "recompute": recompute.run, "cp": cp.run, "generate": generate.run, "moe": moe.run,
    "flight": flight.run, "fused": fused.run, "optimizer": optimizer.run, "prepare": prepare.run,
    "jsonl": jsonl.run, "muon": muon.run, "muon-cost": muon.run_cost, "lora": lora.run,
}
