#!/usr/bin/python3
"""The pipesim Python module against the command line: the same reports, the same errors.

Run by ctest with PYTHONPATH set to the build tree and PIPESIM to the pipesim program.
"""
import errno
import json
import os
import subprocess
import tempfile
import threading
import unittest

import pipesim

PIPESIM = os.environ["PIPESIM"]
SOURCE = os.environ["PIPESIM_SOURCE_DIR"]
TOY = os.path.join(SOURCE, "scenarios", "examples", "toy-gpipe.yaml")
PROFILE = os.path.join(SOURCE, "scenarios", "examples", "profile-csv.yaml")


def cli(*args):
    return subprocess.run([PIPESIM, *args], capture_output=True, text=True)


def cli_json(*args):
    r = cli(*args, "--json", "-")
    if r.returncode != 0:
        raise AssertionError(r.stderr)
    return json.loads(r.stdout)


class Run(unittest.TestCase):
    def test_default_equals_cli_json(self):
        self.assertEqual(pipesim.run(None, reproducible=True),
                         cli_json("run", "--reproducible"))

    def test_exact_sharing_equals_cli_flag(self):
        self.assertEqual(pipesim.run(TOY, reproducible=True, exact_sharing=True),
                         cli_json("run", TOY, "--reproducible", "--exact-sharing"))

    def test_fold_false_equals_no_fold(self):
        hybrid = os.path.join(SOURCE, "scenarios", "examples", "dapple-hybrid.yaml")
        self.assertEqual(pipesim.run(hybrid, reproducible=True, fold=False),
                         cli_json("run", hybrid, "--reproducible", "--no-fold"))

    def test_overrides_equal_cli_set(self):
        # A str is YAML text as after --set KEY=; numbers and bools are written as JSON.
        sets = {"strategy.schedule": "gpipe", "training.micro_batch": 1,
                "cluster.intra_node.bandwidth": "10 GB/s"}
        got = pipesim.run(TOY, set=sets, reproducible=True)
        want = cli_json("run", TOY, "--reproducible", "--set", "strategy.schedule=gpipe",
                        "--set", "training.micro_batch=1",
                        "--set", "cluster.intra_node.bandwidth=10 GB/s")
        self.assertEqual(got, want)
        self.assertEqual(got["overrides"]["training.micro_batch"], "1")
        self.assertEqual(got["schedule"], "gpipe")

    def test_relative_profile_and_mapping_value(self):
        got = pipesim.run(PROFILE, set={"strategy": {"schedule": "gpipe", "pipeline": 2}},
                          reproducible=True)
        want = cli_json("run", PROFILE, "--reproducible", "--set",
                        'strategy={"schedule": "gpipe", "pipeline": 2}')
        self.assertEqual(got, want)

    def test_wall_time_is_measured_unless_reproducible(self):
        self.assertGreater(pipesim.run(TOY)["wall_s"], 0.0)

    def test_version(self):
        self.assertEqual(cli("--version").stdout.strip(), "pipesim " + pipesim.__version__)
        self.assertEqual(pipesim.run(TOY)["version"], pipesim.__version__)


class Errors(unittest.TestCase):
    def check_same_line(self, call, args):
        with self.assertRaises(pipesim.InputError) as caught:
            call()
        r = cli(*args)
        self.assertEqual(r.returncode, 2)
        # The command line's line, without its "pipesim: error: ".
        self.assertEqual("pipesim: error: " + str(caught.exception), r.stderr.rstrip("\n"))
        self.assertNotIn("\n", str(caught.exception))

    def test_bad_key_value_and_file(self):
        self.check_same_line(lambda: pipesim.run(TOY, set={"strategy.shedule": "gpipe"}),
                             ["run", TOY, "--set", "strategy.shedule=gpipe"])
        self.check_same_line(lambda: pipesim.run(None, set={"training.micro_batch": 3}),
                             ["run", "--set", "training.micro_batch=3"])
        self.check_same_line(lambda: pipesim.run(TOY, set={"strategy.vertical_sync": True}),
                             ["run", TOY, "--set", "strategy.vertical_sync=true"])
        missing = os.path.join(SOURCE, "no-such-scenario.yaml")
        with self.assertRaises(FileNotFoundError) as caught:
            pipesim.run(missing)
        self.assertEqual(caught.exception.filename, missing)
        self.assertEqual(caught.exception.errno, errno.ENOENT)
        self.assertIn("cannot read the scenario file: No such file", str(caught.exception))
        self.assertEqual(cli("run", missing).returncode, 2)
        # A file the scenario names is missing: the same error, naming that file.
        with tempfile.TemporaryDirectory() as d:
            scenario = os.path.join(d, "s.yaml")
            with open(scenario, "w") as f:
                text = open(TOY).read()
                f.write(text[:text.index("model:")] + "model: {include: gone.yaml}\n" +
                        text[text.index("training:"):])
            with self.assertRaises(FileNotFoundError) as caught:
                pipesim.run(scenario)
            self.assertTrue(caught.exception.filename.endswith("gone.yaml"),
                            caught.exception.filename)
        # Python's own arguments are named as in Python.
        with self.assertRaises(pipesim.InputError) as caught:
            pipesim.plan(TOY, time_limit="ten")
        self.assertEqual(str(caught.exception), "pipesim.plan: time_limit: "
                         "'ten' is not a quantity (units: ps, ns, us, ms, s)")

    def test_a_path_with_a_nul_is_refused(self):
        # Once read as the path up to the NUL.
        with self.assertRaises(pipesim.InputError) as caught:
            pipesim.run(TOY + "\0x")
        self.assertIn("contains a NUL character", str(caught.exception))

    def test_lone_surrogates_are_input_errors(self):
        # Once pybind11's bare RuntimeError (or a TypeError for the path).
        for call in (lambda: pipesim.run("\udc80.yaml"),
                     lambda: pipesim.run(None, set={"training.micro_batch": "\udc80"}),
                     lambda: pipesim.run(None, set={"\udc80": 1}),
                     lambda: pipesim.sweep(None, grid={"training.micro_batch": "\udc80"})):
            with self.assertRaises(pipesim.InputError) as caught:
                call()
            self.assertIn("lone surrogate", str(caught.exception))
        with self.assertRaises(pipesim.InputError):
            pipesim.run(3)

    def test_input_error_is_a_value_error(self):
        self.assertTrue(issubclass(pipesim.InputError, ValueError))
        with self.assertRaises(ValueError):
            pipesim.run(TOY, set={"cluster.nodes": 0})


class Plan(unittest.TestCase):
    def test_equals_cli_plan_json(self):
        got = pipesim.plan(TOY, top=3, threads=2)
        want = cli_json("plan", TOY, "--top", "3", "--threads", "2", "--quiet")
        self.assertEqual(set(got), set(want))
        # Everything but the timings: the same search gives the same ranking.
        for key in ("best", "candidates", "pareto", "baselines", "explored", "simulated"):
            self.assertEqual(got[key], want[key], key)
        self.assertEqual(len(got["candidates"]), 3)
        self.assertIn("schedule", got["best"]["strategy"])

    def test_reproducible_as_the_command_line(self):
        got = pipesim.plan(TOY, top=2, threads=1, reproducible=True)
        want = cli_json("plan", TOY, "--top", "2", "--threads", "2", "--quiet", "--reproducible")
        self.assertEqual(got["wall_s"], 0.0)
        for key in ("best", "candidates", "wall_s", "analytic_s"):
            self.assertEqual(got[key], want[key], key)
        with self.assertRaises(pipesim.InputError):
            pipesim.plan(TOY, reproducible=True, time_limit=5)

    def test_time_limit_in_seconds_or_with_unit(self):
        for limit in (30, "30s"):
            self.assertGreater(pipesim.plan(TOY, top=1, time_limit=limit)["simulated"], 0)
        # What the command line refuses, Python refuses: zero, negative, NaN, infinite.
        for bad in (0, -1, float("nan"), float("inf"), "0s"):
            with self.assertRaises(pipesim.InputError):
                pipesim.plan(TOY, top=1, time_limit=bad)

    def test_compare_bound_and_exhaustive_as_the_command_line(self):
        mine = "{schedule: gpipe, pipeline: 2}"
        got = pipesim.plan(TOY, top=2, threads=2, compare=[mine], exhaustive=True,
                           tolerance=0.0, reproducible=True)
        want = cli_json("plan", TOY, "--top", "2", "--threads", "2", "--quiet", "--compare",
                        mine, "--exhaustive", "--tolerance", "0%", "--reproducible")
        for key in ("best", "compared", "lower_bound_iteration_time_s", "optimality_gap",
                    "exhaustive", "tolerance"):
            self.assertEqual(got[key], want[key], key)
        self.assertEqual(got["compared"][0]["strategy"], mine)
        self.assertGreaterEqual(got["compared"][0]["rank"], 1)
        self.assertLessEqual(got["lower_bound_iteration_time_s"], got["best"]["iteration_time_s"])
        with self.assertRaises(pipesim.InputError):
            pipesim.plan(TOY, compare=["{schedule: bogus}"])
        with self.assertRaises(pipesim.InputError):
            pipesim.plan(TOY, tolerance=0.01)


class Sweep(unittest.TestCase):
    def test_equals_cli_sweep_json(self):
        got = pipesim.sweep(TOY, grid={"training.micro_batch": "1..16*2",
                                       "strategy.schedule": ["gpipe", "dapple"]},
                            set={"training.iterations": 1}, threads=2)
        want = cli_json("sweep", TOY, "--grid", "training.micro_batch=1..16*2",
                        "--grid", "strategy.schedule=gpipe,dapple",
                        "--set", "training.iterations=1", "--threads", "2")
        self.assertEqual(got, want)
        self.assertEqual(len(got["points"]), 5 * 2)

    def test_zip_and_failing_points(self):
        # micro_batch 3 does not divide the global batch of 64: that point fails, the rest run.
        got = pipesim.sweep(TOY, grid={"training.micro_batch": [2, 3, 4],
                                       "strategy.schedule": "gpipe,dapple,gpipe"}, zip=True)
        want = cli_json("sweep", TOY, "--grid", "training.micro_batch=2,3,4",
                        "--grid", "strategy.schedule=gpipe,dapple,gpipe", "--zip")
        self.assertEqual(got, want)
        self.assertEqual(len(got["points"]), 3)
        self.assertEqual(got["failed"], 1)

    def test_malformed_grid_is_input_error(self):
        with self.assertRaises(pipesim.InputError) as caught:
            pipesim.sweep(TOY, grid={"training.micro_batch": "8..1"})
        r = cli("sweep", TOY, "--grid", "training.micro_batch=8..1")
        self.assertEqual(r.returncode, 2)
        self.assertEqual("pipesim: error: " + str(caught.exception), r.stderr.rstrip("\n"))


class Validate(unittest.TestCase):
    def test_fields_as_the_command_line(self):
        # Measured times differ between runs: the same fields, the same simulation.
        got = pipesim.validate(TOY, set={"training.iterations": 1}, time_scale=0.01, warmup=0,
                               iterations=1)
        want = cli_json("validate", TOY, "--set", "training.iterations=1", "--time-scale",
                        "0.01", "--warmup", "0", "--iterations", "1")
        self.assertEqual(list(got), list(want))
        for key in ("scenario", "schedule", "backend", "predicted_makespan_s", "overrides"):
            self.assertEqual(got[key], want[key], key)
        self.assertGreater(got.measured_makespan_s, 0)
        with self.assertRaises(pipesim.InputError):
            pipesim.validate(TOY, backend="tpu")


class Resolve(unittest.TestCase):
    def test_equals_cli_resolved_and_reruns_identically(self):
        sets = {"strategy": {"schedule": "dapple", "pipeline": 8}, "strategy.data": 2}
        text = pipesim.resolve(None, set=sets)
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "resolved.yaml")
            r = cli("run", "--set", 'strategy={"schedule": "dapple", "pipeline": 8}',
                    "--set", "strategy.data=2", "--resolved", path)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(path) as f:
                self.assertEqual(f.read(), text)
            again = pipesim.run(path, reproducible=True)
        first = pipesim.run(None, set=sets, reproducible=True)
        self.assertEqual(again["overrides"], {})
        first.pop("overrides")
        again.pop("overrides")
        self.assertEqual(first, again)


class Threads(unittest.TestCase):
    def test_gil_is_released_while_simulating(self):
        # While another thread simulates, this one keeps running Python: with the GIL held
        # throughout, the loop below could not start before the simulation ended.
        ticks = 0
        t = threading.Thread(target=lambda: pipesim.run(None, set={"training.iterations": 20}))
        t.start()
        while t.is_alive():
            ticks += 1
        t.join()
        self.assertGreater(ticks, 100)

    def test_concurrent_runs_equal_serial_ones(self):
        serial = [pipesim.run(TOY, set={"training.micro_batch": b}, reproducible=True)
                  for b in (1, 2, 4)]
        out = [None] * 3

        def work(i, b):
            out[i] = pipesim.run(TOY, set={"training.micro_batch": b}, reproducible=True)
        threads = [threading.Thread(target=work, args=(i, b)) for i, b in enumerate((1, 2, 4))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual(out, serial)


class Values(unittest.TestCase):
    def test_paths_may_be_path_like(self):
        import pathlib
        self.assertEqual(pipesim.run(pathlib.Path(TOY), reproducible=True),
                         pipesim.run(TOY, reproducible=True))
        self.assertEqual(pipesim.resolve(pathlib.Path(TOY)), pipesim.resolve(TOY))
        self.assertEqual(pipesim.run(os.fsencode(TOY), reproducible=True)["makespan_s"],
                         pipesim.run(TOY, reproducible=True)["makespan_s"])

    def test_results_read_as_objects_and_dicts(self):
        r = pipesim.run(TOY, reproducible=True)
        self.assertIsInstance(r, pipesim.Result)
        self.assertIsInstance(r, dict)
        self.assertEqual(r.makespan_s, r["makespan_s"])
        self.assertEqual(r.devices[0].name, r["devices"][0]["name"])
        self.assertIn("makespan_s", dir(r))
        with self.assertRaises(AttributeError) as caught:
            r.makespan
        self.assertIn("no field 'makespan'", str(caught.exception))
        plain = r.to_dict()
        self.assertIs(type(plain), dict)
        self.assertIs(type(plain["devices"][0]), dict)
        self.assertEqual(plain, r)
        self.assertEqual(json.loads(json.dumps(r)), plain)


if __name__ == "__main__":
    unittest.main()

