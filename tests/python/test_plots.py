#!/usr/bin/python3
"""Every script in plots/ renders from small reports made by the pipesim program.

Run by ctest with PIPESIM (the program) and PIPESIM_SOURCE_DIR; exit 77 (skipped) when this
interpreter has no matplotlib.
"""
import json
import os
import struct
import subprocess
import sys
import tempfile
import unittest

try:
    import matplotlib  # noqa: F401
except ImportError:
    print("matplotlib is missing: the plots are not tested")
    sys.exit(77)

PIPESIM = os.environ["PIPESIM"]
SOURCE = os.environ["PIPESIM_SOURCE_DIR"]
PLOTS = os.path.join(SOURCE, "plots")
TOY = os.path.join(SOURCE, "scenarios", "examples", "toy-gpipe.yaml")
# Readable figures have a fixed width and a bounded height however many GPUs there are.
MAX_WIDTH, MAX_HEIGHT = 1600, 2400


def png_size(path):
    with open(path, "rb") as f:
        head = f.read(24)
    assert head[:8] == b"\x89PNG\r\n\x1a\n", path
    return struct.unpack(">II", head[16:24])


class Plots(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.dir = cls.tmp.name

        def pipesim(*args):
            subprocess.run([PIPESIM, *args], check=True, capture_output=True)
        # The default scenario on 16 nodes with 8 pipeline copies: 128 GPUs.
        pipesim("run", "--set", "cluster.nodes=16", "--set", "strategy.data=32",
                "--json", cls.path("big.json"), "--csv", cls.path("big.csv"))
        pipesim("run", TOY, "--json", cls.path("toy.json"), "--csv", cls.path("toy.csv"))
        pipesim("plan", TOY, "--top", "5", "--threads", "2", "--quiet",
                "--json", cls.path("plan.json"))
        pipesim("sweep", TOY, "--grid", "training.micro_batch=1..32*2",
                "--grid", "strategy.schedule=gpipe,dapple", "--threads", "2",
                "--csv", cls.path("sweep.csv"), "--json", cls.path("sweep.json"))

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    @classmethod
    def path(cls, name):
        return os.path.join(cls.dir, name)

    def render(self, script, source, *options):
        out = self.path(f"{script}-{len(os.listdir(self.dir))}.png")
        r = subprocess.run([sys.executable, os.path.join(PLOTS, script + ".py"),
                            self.path(source), out, *options], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        w, h = png_size(out)
        self.assertLessEqual(w, MAX_WIDTH)
        self.assertLessEqual(h, MAX_HEIGHT)
        return w, h

    def test_memory(self):
        self.render("memory", "toy.json")
        self.render("memory", "big.json")  # 128 GPUs: one bar per stage

    def test_timeline(self):
        self.render("timeline", "toy.csv", "--report", self.path("toy.json"))
        self.render("timeline", "big.csv", "--report", self.path("big.json"))
        self.render("timeline", "big.csv")  # grouped by identical op sequences

    def test_pareto(self):
        self.render("pareto", "plan.json")
        # An out-of-memory baseline and candidate far off: the axes span what fits.
        with open(self.path("plan.json")) as f:
            plan = json.load(f)
        far = dict(plan["best"], oom=True, iteration_time_s=1e3, peak_memory_bytes=2**50)
        plan["candidates"].append(far)
        plan["baselines"]["pipedream"] = far
        with open(self.path("far.json"), "w") as f:
            json.dump(plan, f)
        self.render("pareto", "far.json")

    def test_validation(self):
        # The fields `pipesim validate --sweep --json` writes, for two configurations.
        point = {"backend": "host", "measured_makespan_s": 0.010,
                 "predicted_makespan_s": 0.012, "replay_makespan_s": 0.0105}
        report = {"summary": {"predicted_mape": 0.2, "kendall_tau": 1.0},
                  "configurations": [{**point, "schedule": "gpipe"},
                                     {**point, "schedule": "dapple",
                                      "measured_makespan_s": 0.020}]}
        with open(self.path("validate.json"), "w") as f:
            json.dump(report, f)
        self.render("validation", "validate.json")
        # With --calibrate (and rebuilt from progress lines: "partial").
        for p in report["configurations"]:
            p["calibrated_makespan_s"] = p["measured_makespan_s"] * 0.97
        report["summary"].update({"calibrated_mape": 0.03, "calibrated_kendall_tau": 1.0,
                                  "replay_mape": 0.01, "partial": True})
        with open(self.path("calibrated.json"), "w") as f:
            json.dump(report, f)
        self.render("validation", "calibrated.json")

    def test_sweep(self):
        self.render("sweep", "sweep.csv")
        self.render("sweep", "sweep.json", "--x", "training.micro_batch", "--y",
                    "peak_memory_bytes", "--logx")
        self.render("sweep", "sweep.csv", "--x", "strategy.schedule", "--y", "bubble_fraction")

    def test_missing_matplotlib_is_one_clear_line(self):
        # -S: no site packages, so no matplotlib, and this interpreter is not re-run.
        r = subprocess.run([sys.executable, "-S", os.path.join(PLOTS, "memory.py"),
                            self.path("toy.json"), self.path("none.png")],
                           capture_output=True, text=True,
                           env={**os.environ, "PIPESIM_PLOTS_REEXEC": "1"})
        self.assertEqual(r.returncode, 3)
        self.assertEqual(r.stderr.count("\n"), 1, r.stderr)
        self.assertIn("matplotlib is missing", r.stderr)


if __name__ == "__main__":
    unittest.main()
