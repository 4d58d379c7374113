// The `pipesim` Python module: the public API (api/pipesim.h) with reports as dicts.
//
//   import pipesim
//   r = pipesim.run("scenario.yaml", set={"training.micro_batch": 1})  # == run --json
//   p = pipesim.plan(None, top=5)                                         # == plan --json
//   s = pipesim.sweep(None, grid={"training.micro_batch": "1..8*2"})    # == sweep --json
//   v = pipesim.validate("scenario.yaml", iterations=3)                   # == validate --json
//
// Results are pipesim.Result: the JSON object as a dict whose fields are attributes too
// (r.makespan_s == r["makespan_s"]), nested objects alike; to_dict() gives plain dicts.
// LoadedScenario paths are str or os.PathLike. Bad input raises pipesim.InputError (a
// ValueError) whose message is the line the command line prints after "pipesim: error: ";
// a scenario file that does not exist, or a file it names, raises FileNotFoundError. The GIL
// is released while pipesim loads and simulates, so Python threads can run several
// scenarios at once.
#include <fmt/format.h>
#include <pybind11/eval.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "api/pipesim.h"

namespace py = pybind11;

namespace pipesim::api {
namespace {

// pipesim.Result, made once when the module is imported (never destroyed: a static
// py::object would be released after the interpreter is gone).
py::object* result_class = nullptr;

py::object to_python(const nlohmann::ordered_json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float:
      return py::float_(j.get<double>());
    case nlohmann::json::value_t::string:
      return py::str(j.get_ref<const std::string&>());
    case nlohmann::json::value_t::array: {
      py::list out;
      for (const auto& v : j) out.append(to_python(v));
      return out;
    }
    case nlohmann::json::value_t::object: {
      py::dict out;
      for (const auto& [key, v] : j.items()) out[py::str(key)] = to_python(v);
      return (*result_class)(out);
    }
    default:
      throw std::logic_error("a JSON value of a kind reports do not hold");
  }
}

// A value given from Python as the YAML text pipesim reads: a str is YAML text already, as
// after --set KEY=; anything else is written as JSON (True -> true, 2 -> 2, {"a": 1} ->
// {"a": 1}), which YAML reads back the same.
// A Python str as UTF-8; a str that has none (a lone surrogate, as os.fsdecode leaves for
// undecodable bytes) is an InputError naming `what`, not pybind11's bare RuntimeError.
std::string utf8(const py::handle& text, const std::string& what) {
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(text.ptr(), &size);
  if (data == nullptr) {
    PyErr_Clear();
    throw Error(fmt::format("{} is not valid text: it holds a lone surrogate", what),
                "a str of Unicode characters", "", "pipesim");
  }
  return {data, static_cast<size_t>(size)};
}

std::string yaml_text(const py::handle& value) {
  if (py::isinstance<py::str>(value)) return utf8(value, "a value");
  return utf8(py::module_::import("json").attr("dumps")(value), "a value");
}

// set={"key": value}
std::vector<Setting> settings(const std::optional<py::dict>& set) {
  std::vector<Setting> out;
  if (!set) return out;
  for (const auto& [key, value] : *set)
    out.push_back({utf8(py::str(key), "a key of set="), yaml_text(value)});
  return out;
}

// The scenario argument: None (the embedded default) or a path: a str, bytes or an
// os.PathLike.
std::string path_of(const py::object& scenario) {
  if (scenario.is_none()) return "";
  if (py::isinstance<py::bytes>(scenario) || py::hasattr(scenario, "__fspath__")) {
    const py::module_ os = py::module_::import("os");
    return path_of(os.attr("fsdecode")(os.attr("fspath")(scenario)));
  }
  if (!py::isinstance<py::str>(scenario))
    throw Error(fmt::format("the scenario is a {}, not a path",
                            utf8(py::str(py::type::of(scenario).attr("__name__")), "a type")),
                "a path (str, bytes or os.PathLike), or None for the default scenario", "scenario",
                "pipesim");
  return utf8(scenario, "the scenario path");
}

// The scenario argument with set= applied, loaded without the GIL.
LoadedScenario scenario_of(const py::object& scenario, const std::optional<py::dict>& set) {
  const std::vector<Setting> with = settings(set);
  const std::string path = path_of(scenario);
  const py::gil_scoped_release release;
  return LoadedScenario::load(path, with);
}

py::object run_py(const py::object& scenario, const std::optional<py::dict>& set, bool reproducible,
                  bool exact_sharing, bool fold) {
  const LoadedScenario s = scenario_of(scenario, set);
  std::string json;
  {
    const py::gil_scoped_release release;
    json = run(s, {.reproducible = reproducible, .exact_sharing = exact_sharing, .fold = fold})
               .json;
  }
  return to_python(nlohmann::ordered_json::parse(json));
}

py::object plan_py(const py::object& scenario, const std::optional<py::dict>& set, int top,
                   int threads, const std::optional<py::object>& time_limit, bool exhaustive,
                   bool reproducible, const std::vector<std::string>& compare,
                   const std::optional<double>& tolerance, double headroom,
                   const std::vector<std::string>& fix) {
  PlanConfig options{.top = top,
                     .threads = threads,
                     .exhaustive = exhaustive,
                     .headroom = headroom,
                     .compare = compare,
                     .fix = fix,
                     .reproducible = reproducible};
  options.tolerance = tolerance;  // checked by plan(): exhaustive only
  if (time_limit && !time_limit->is_none()) {
    // Seconds as a number, or a time with its unit as on the command line ("60s").
    if (py::isinstance<py::str>(*time_limit)) {
      try {
        options.time_limit_s = parse_seconds(utf8(*time_limit, "time_limit"));
      } catch (const Error& e) {
        throw Error(e.problem(), "units: ps, ns, us, ms, s", "time_limit", "pipesim.plan");
      }
    } else {
      options.time_limit_s = time_limit->cast<double>();
    }
  }
  const LoadedScenario s = scenario_of(scenario, set);
  std::string json;
  {
    const py::gil_scoped_release release;
    json = plan(s, options).json;
  }
  return to_python(nlohmann::ordered_json::parse(json));
}

// grid={"key": values}: a str is VALUES as after --grid KEY= ("1..64*2", "a,b,c"); a list
// or tuple gives the values one by one (each as in set=).
std::vector<Axis> grid_axes(const py::dict& grid) {
  std::vector<Axis> axes;
  for (const auto& [key, values] : grid) {
    const std::string k = utf8(py::str(key), "a key of grid=");
    if (py::isinstance<py::str>(values)) {
      axes.push_back(Axis::parse(k + "=" + utf8(values, "a grid value")));
    } else if (py::isinstance<py::list>(values) || py::isinstance<py::tuple>(values)) {
      Axis axis{k, {}};
      for (const auto& v : values) axis.values.push_back(yaml_text(v));
      axes.push_back(std::move(axis));
    } else {
      throw Error(fmt::format("the values of '{}' are neither a string nor a list", k),
                  "'1..64*2', 'a,b,c' or a list of values", "grid", "pipesim.sweep");
    }
  }
  return axes;
}

py::object sweep_py(const py::object& scenario, const py::dict& grid,
                    const std::optional<py::dict>& set, bool zip, int threads) {
  const std::vector<Axis> axes = grid_axes(grid);
  const LoadedScenario s = scenario_of(scenario, set);
  std::string json;
  {
    const py::gil_scoped_release release;
    json = sweep(s, axes, {.zip = zip, .threads = threads}).json;
  }
  return to_python(nlohmann::ordered_json::parse(json));
}

py::object validate_py(const py::object& scenario, const std::optional<py::dict>& set,
                       const std::string& backend, const py::object& time_scale, int warmup,
                       int iterations, bool calibrate) {
  ValidateConfig options{.backend = backend,
                         .time_scale = py::isinstance<py::str>(time_scale)
                                           ? utf8(time_scale, "time_scale")
                                           : utf8(py::str(time_scale), "time_scale"),
                         .warmup = warmup,
                         .iterations = iterations,
                         .calibrate = calibrate};
  const LoadedScenario s = scenario_of(scenario, set);
  std::string json;
  {
    const py::gil_scoped_release release;
    json = validate(s, options).json;
  }
  return to_python(nlohmann::ordered_json::parse(json));
}

std::string resolve_py(const py::object& scenario, const std::optional<py::dict>& set) {
  const LoadedScenario s = scenario_of(scenario, set);
  const py::gil_scoped_release release;
  return s.resolved_yaml();
}

// pipesim.InputError (a ValueError) and FileNotFoundError from the API's errors.
void register_errors(py::module_& m) {
  // Never destroyed: a static py::object would be released after the interpreter is gone.
  static auto* input_error =
      new py::exception<pipesim::api::Error>(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const pipesim::api::FileNotFound& e) {
      const py::object error =
          py::module_::import("builtins").attr("FileNotFoundError")(ENOENT, e.what(), e.path());
      PyErr_SetObject(PyExc_FileNotFoundError, error.ptr());
    } catch (const pipesim::api::Error& e) {
      (*input_error)(e.what());
    }
  });
}

// pipesim.Result: the class of every result.
void define_result(py::module_& m) {
  // A dict whose keys are attributes too: reports stay JSON-shaped (json.dumps, ==, [])
  // and read as objects.
  py::dict space;
  py::exec(R"(
class Result(dict):
    """A pipesim result: the JSON object as a dict, its fields also as attributes."""

    __slots__ = ()

    def __getattr__(self, name):
        try:
            return self[name]
        except KeyError:
            raise AttributeError(f"no field '{name}'; fields: {', '.join(self)}") from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self))

    def to_dict(self):
        """Plain dicts and lists all the way down."""
        def plain(v):
            if isinstance(v, dict):
                return {k: plain(x) for k, x in v.items()}
            if isinstance(v, list):
                return [plain(x) for x in v]
            return v
        return plain(self)
)",
           space);
  result_class = new py::object(space["Result"]);
  result_class->attr("__module__") = "pipesim";
  m.attr("Result") = *result_class;
}

}  // namespace
}  // namespace pipesim::api

PYBIND11_MODULE(pipesim, m) {
  using namespace pybind11::literals;
  m.doc() = "pipesim: a discrete-event simulator of pipeline- and data-parallel DNN training";
  m.attr("__version__") = pipesim::api::version();
  pipesim::api::register_errors(m);
  pipesim::api::define_result(m);
  m.def("run", &pipesim::api::run_py, "scenario"_a = py::none(), py::kw_only(),
        "set"_a = py::none(), "reproducible"_a = false, "exact_sharing"_a = false, "fold"_a = true,
        "Simulates a scenario (a YAML file, or the embedded default for None) with `set` "
        "overrides (dotted key -> value) and returns the report of `pipesim run --json`. "
        "reproducible=True reports wall_s as 0; exact_sharing=True is `run --exact-sharing`; "
        "fold=False is `run --no-fold`.");
  m.def("plan", &pipesim::api::plan_py, "scenario"_a = py::none(), py::kw_only(),
        "set"_a = py::none(), "top"_a = 10, "threads"_a = 0, "time_limit"_a = py::none(),
        "exhaustive"_a = false, "reproducible"_a = false, "compare"_a = std::vector<std::string>{},
        "tolerance"_a = py::none(), "headroom"_a = 0.0, "fix"_a = std::vector<std::string>{},
        "Searches strategies for the scenario's cluster, model and training and returns the "
        "object of `pipesim plan --json` (best, candidates, pareto, baselines, compared, "
        "lower_bound_iteration_time_s, optimality_gap, exhaustive, ...). "
        "time_limit: seconds, or a string such as '60s'. reproducible=True reports wall_s and "
        "analytic_s as 0 (not with time_limit). compare: your own strategies (YAML mappings as "
        "`--compare` takes), ranked against the planner's. tolerance: with exhaustive=True, "
        "the share by which a plan left unsimulated may be faster (default 0.0001). headroom: "
        "rank only plans leaving that share of the GPUs' memory free (`--headroom`). fix: "
        "dimensions kept at the scenario's value (`--fix`, e.g. ['strategy.schedule']).");
  m.def("sweep", &pipesim::api::sweep_py, "scenario"_a = py::none(), py::kw_only(), "grid"_a,
        "set"_a = py::none(), "zip"_a = false, "threads"_a = 0,
        "Runs the scenario at every point of a grid (key -> '1..64*2', 'a,b,c' or a list of "
        "values; the product, or with zip=True the lists paired) on `threads` threads (0: "
        "every core) and returns the object of `pipesim sweep --json`. A point that fails "
        "validation carries its message in `error`.");
  m.def("validate", &pipesim::api::validate_py, "scenario"_a = py::none(), py::kw_only(),
        "set"_a = py::none(), "backend"_a = "host", "time_scale"_a = "auto", "warmup"_a = 1,
        "iterations"_a = 10, "calibrate"_a = false,
        "Runs the scenario's TaskGraph for real on a backend (host: CPU threads; torch: "
        "PyTorch processes over gloo; cuda: one NVIDIA GPU) and returns the comparison with its simulation, the "
        "object of `pipesim validate --json` (measured_makespan_s, predicted_makespan_s, "
        "predicted_error, noise_floor, peak_memory, ...). time_scale: wall seconds per scenario "
        "second, or 'auto'.");
  m.def("resolve", &pipesim::api::resolve_py, "scenario"_a = py::none(), py::kw_only(),
        "set"_a = py::none(),
        "The scenario as simulated (overrides applied, shorthands expanded), as the YAML text "
        "`pipesim run --resolved` writes.");
}
