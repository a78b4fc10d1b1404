"""gpucheck.configs: the jobs gpu-check writes (each family's parity job, the bench's job)."""
import os
import sys
import tomllib
import unittest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from gpucheck import configs  # noqa: E402
from gpucheck_fakes import LogsTestCase  # noqa: E402


class ParityJobs(unittest.TestCase):
    def test_families_differ_only_in_their_model(self):
        gpt, llama, mixtral = (tomllib.loads(configs.parity_config(f))
                               for f in ("gpt", "llama", "mixtral"))
        self.assertEqual(gpt["model"]["dropout"], 0.1)
        same = {k: v for k, v in gpt["model"].items() if k != "dropout"}
        self.assertEqual(llama["model"], dict(same, name="llama", n_kv_head=2))
        self.assertNotIn("dropout", llama["model"])
        self.assertEqual((llama["model"]["name"], llama["model"]["n_kv_head"]), ("llama", 2))
        self.assertEqual(mixtral["model"]["num_experts"], 4)
        self.assertEqual(mixtral["model"]["experts_per_token"], 2)
        for job in (llama, mixtral):
            self.assertEqual({k: v for k, v in job.items() if k != "model"},
                             {k: v for k, v in gpt.items() if k != "model"})
        self.assertTrue(configs.parity_config("mixtral").startswith(
            "# gpu-check's parity job: a small Mixtral\n"))


class BenchJob(LogsTestCase):
    def test_gpu_takes_the_124m_config_and_cpu_writes_a_small_one(self):
        self.assertEqual(configs.bench_job("gpu", self.folder), "configs/gpt2-124m.toml")
        self.assertEqual(os.listdir(self.folder), [])
        path = configs.bench_job("cpu", self.folder)
        self.assertEqual(path, os.path.join(self.folder, "bench-small.toml"))
        with open(path, "rb") as f:
            job = tomllib.load(f)
        self.assertEqual((job["training"]["global_batch_size"], job["training"]["seq_len"]), (4, 128))
        self.assertEqual((job["parallel"], job["data"]), ({"dp": 1, "tp": 1}, {"source": "synthetic"}))


if __name__ == "__main__":
    unittest.main()
