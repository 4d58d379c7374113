// Measured per-layer profiles (model: {profile: FILE}): a CSV table or PipeDream's
// profile graph. model_reader.cc picks the format and reads the YAML form.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <queue>

#include "core/checked.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/units.h"
#include "scenario/internal/reader.h"
#include "scenario/internal/sections.h"

namespace pipesim::internal {

// model: {profile: layers.csv}: one row per layer with a header naming the columns
// (name, forward, backward or backward_input + backward_weight, activation, output,
// params, optimizer, repeat); every cell with its unit, as in the YAML form. The path is
// relative to the scenario file. Errors point at the CSV's line and column.
namespace {

const std::vector<std::string> kCsvColumns{
    "name",   "forward", "backward",  "backward_input", "backward_weight",  "activation",
    "output", "params",  "optimizer", "repeat",         "weight_activation"};

// The cells of one CSV line, trimmed, each with its 1-based column.
std::vector<std::pair<std::string, int>> split_csv(const std::string& line) {
  std::vector<std::pair<std::string, int>> cells;
  size_t start = 0;
  for (;;) {
    const size_t comma = line.find(',', start);
    std::string cell =
        line.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const size_t b = cell.find_first_not_of(" \t\r"), e = cell.find_last_not_of(" \t\r");
    cells.emplace_back(b == std::string::npos ? "" : cell.substr(b, e - b + 1),
                       static_cast<int>(start + (b == std::string::npos ? 0 : b)) + 1);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return cells;
}

bool names_a_column(const std::vector<std::pair<std::string, int>>& header) {
  return std::any_of(header.begin(), header.end(), [](const auto& cell) {
    return std::find(kCsvColumns.begin(), kCsvColumns.end(), cell.first) != kCsvColumns.end();
  });
}

}  // namespace

bool is_profile_csv(const std::string& text) {
  return names_a_column(split_csv(text.substr(0, text.find('\n'))));
}

namespace {

// The header's columns, each known and given once, with forward and backward among them.
std::vector<std::string> read_csv_header(const std::vector<std::pair<std::string, int>>& header,
                                         const std::string& file) {
  const std::vector<std::string>& known = kCsvColumns;
  // A first line with no known column is not a profile header: it may be any file the user
  // pointed at, so it is not quoted.
  if (!names_a_column(header)) {
    throw InputError("this file is not a profile: its first line names no known column",
                     "a CSV header of columns: " + join(known), "model.profile", {file, 1, 1});
  }
  std::vector<std::string> columns;
  for (const auto& [name, col] : header) {
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      throw InputError(fmt::format("unknown column '{}'{}", name, suggestion(name, known)),
                       "columns: " + join(known), "model.profile", {file, 1, col});
    }
    if (std::find(columns.begin(), columns.end(), name) != columns.end())
      throw InputError(fmt::format("the column '{}' is given twice", name),
                       "each column once", "model.profile", {file, 1, col});
    columns.push_back(name);
  }
  auto has = [&](const char* c) {
    return std::find(columns.begin(), columns.end(), c) != columns.end();
  };
  if (!has("forward") || !(has("backward") || (has("backward_input") && has("backward_weight")))) {
    throw InputError("the header lacks forward and backward columns",
                     "forward, and backward or backward_input + backward_weight", "model.profile",
                     {file, 1, 1});
  }
  if (has("weight_activation") && !has("backward_input")) {
    int col = 1;
    for (const auto& [name, c] : header)
      if (name == "weight_activation") col = c;
    throw InputError(
        "weight_activation is what a separate weight-gradient pass keeps, but the "
        "profile's backward is not split",
        "weight_activation with backward_input + backward_weight",
        "model.profile.weight_activation", {file, 1, col});
  }
  return columns;
}

// One cell into the layer (or its repeat count).
void read_csv_cell(const std::string& c, const std::string& v, Layer& l, int64_t& repeat) {
  if (c == "name")
    l.name = v;
  else if (c == "forward")
    l.forward = parse_time(v);
  else if (c == "backward")
    l.backward_input = parse_time(v);
  else if (c == "backward_input") {
    l.backward_input = parse_time(v);
    l.split_backward = true;
  } else if (c == "backward_weight") {
    l.backward_weight = parse_time(v);
    l.split_backward = true;
  } else if (c == "activation")
    l.activation_bytes = parse_bytes(v);
  else if (c == "output")
    l.output_bytes = parse_bytes(v);
  else if (c == "weight_activation")
    l.weight_activation = parse_bytes(v);
  else if (c == "params")
    l.params = parse_count(v);
  else if (c == "optimizer") {
    l.optimizer = parse_time(v);
    l.optimizer_given = true;
  } else if (c == "repeat") {
    repeat = parse_count(v);
    if (repeat < 1 || repeat > 100'000)
      throw InputError(fmt::format("repeat {} is out of range", repeat), "1 to 100000");
  }
}

}  // namespace

Model read_profile_csv(std::istream& in, const std::string& file) {
  std::string line;
  int lineno = 1;
  if (!std::getline(in, line))
    throw InputError("the profile is empty", "a header row, then one row per layer",
                     "model.profile", {file});
  const std::vector<std::string> columns = read_csv_header(split_csv(line), file);
  Model m;
  m.name = lossy_utf8(std::filesystem::path(file).stem().string());
  while (std::getline(in, line)) {
    ++lineno;
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const auto cells = split_csv(line);
    if (cells.size() != columns.size()) {
      throw InputError(fmt::format("{} cells for {} columns", cells.size(), columns.size()),
                       "one cell per column", "model.profile", {file, lineno, 1});
    }
    Layer l;
    l.name = fmt::format("layer{}", m.layers.size());
    int64_t repeat = 1;
    for (size_t k = 0; k < cells.size(); ++k) {
      try {
        read_csv_cell(columns[k], cells[k].first, l, repeat);
      } catch (InputError& e) {
        e.set_key_if_empty(fmt::format("model.profile.{}", columns[k]));
        e.set_location_if_empty({file, lineno, cells[k].second});
        throw;
      }
    }
    if (l.weight_activation && *l.weight_activation > l.activation_bytes) {
      const auto col = static_cast<size_t>(
          std::find(columns.begin(), columns.end(), "weight_activation") - columns.begin());
      throw InputError(fmt::format("weight_activation {} B is more than the layer's activation "
                                   "{} B",
                                   *l.weight_activation, l.activation_bytes),
                       "at most the activation: W keeps part of what F allocated",
                       "model.profile.weight_activation", {file, lineno, cells[col].second});
    }
    if (static_cast<int64_t>(m.layers.size()) + repeat > 1'000'000) {
      throw InputError("the model would have more than 1,000,000 layers",
                       "fewer rows or a smaller repeat", "model.profile", {file, lineno, 1});
    }
    append_repeated(m, l, repeat);
  }
  if (m.layers.empty())
    throw InputError("the profile has no layers", "one row per layer", "model.profile",
                     {file, lineno, 1});
  return m;
}

// PipeDream's profile graph (graph/graph.py): one line per node,
//   ID -- DESCRIPTION -- forward_compute_time=MS, backward_compute_time=MS,
//         activation_size=BYTES, parameter_size=BYTES[ -- stage_id=N]
// and one indented line per edge, "ID -- ID". Nodes become layers in topological order
// (ties in file order); source nodes described as "Input..." are the model's input. Times
// are milliseconds; activation_size (a node's output, a list "[a; b]" summed) is what the
// layer keeps for its backward; a layer's output is every node's activation that crosses
// the cut after it; parameter_size counts fp32 bytes, 4 per parameter.
namespace {

// The integers in a PyTorch module description, in order: "Conv2d(64, 128,
// kernel_size=(3, 3), ...)" -> 64, 128, 3, 3, ...
std::vector<double> numbers_in(const std::string& desc) {
  std::vector<double> out;
  for (size_t i = 0; i < desc.size();) {
    if (desc[i] >= '0' && desc[i] <= '9' &&
        (i == 0 || !std::isalnum(static_cast<unsigned char>(desc[i - 1])))) {
      double v = 0;
      const auto [ptr, ec] = std::from_chars(desc.data() + i, desc.data() + desc.size(), v);
      if (ec != std::errc()) break;
      out.push_back(v);
      i = static_cast<size_t>(ptr - desc.data());
    } else {
      ++i;
    }
  }
  return out;
}

// Forward FLOPs of a Conv2d(in, out, kernel_size=(kh, kw), ...) or Linear(in_features=i,
// out_features=o) node from its fp32 output size; 0 for anything else.
double node_matrix_flops(const std::string& desc, double output_bytes) {
  const std::vector<double> v = numbers_in(desc);
  const double outputs = output_bytes / 4;
  if (desc.starts_with("Conv2d(") && v.size() >= 4) return 2 * v[0] * v[2] * v[3] * outputs;
  if (desc.starts_with("Linear(") && v.size() >= 2) return 2 * v[0] * outputs;
  return 0;
}

}  // namespace

Model read_profile_graph(std::istream& in, const std::string& file,
                         std::vector<double>* matrix_flops) {
  struct Node {
    std::string id, desc;
    double fwd_ms = 0, bwd_ms = 0, activation = 0, param_bytes = 0;
    int line = 0;
  };
  std::vector<Node> nodes;
  std::map<std::string, size_t> index;
  std::vector<std::vector<size_t>> succ;
  std::vector<int> indeg;
  const std::string allowed =
      "'ID -- DESCRIPTION -- forward_compute_time=MS, backward_compute_time=MS, "
      "activation_size=BYTES, parameter_size=BYTES' or an indented edge 'ID -- ID'";
  auto split = [](std::string_view s, std::string_view sep) {
    std::vector<std::string> out;
    for (size_t start = 0;;) {
      const size_t at = s.find(sep, start);
      out.emplace_back(s.substr(start, at == std::string_view::npos ? s.npos : at - start));
      if (at == std::string_view::npos) return out;
      start = at + sep.size();
    }
  };
  auto trim = [](std::string s) {
    const size_t b = s.find_first_not_of(" \t\r"), e = s.find_last_not_of(" \t\r");
    return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
  };
  std::vector<std::pair<std::pair<std::string, std::string>, int>> edges;
  std::string line;
  for (int lineno = 1; std::getline(in, line); ++lineno) {
    if (trim(line).empty()) continue;
    const bool edge = line[0] == ' ' || line[0] == '\t';
    const auto parts = split(trim(line), " -- ");
    if (edge) {
      if (parts.size() != 2)
        throw InputError("malformed edge", allowed, "model.profile", {file, lineno, 1});
      edges.push_back({{trim(parts[0]), trim(parts[1])}, lineno});
      continue;
    }
    if (parts.size() < 3 || parts.size() > 4)
      throw InputError("malformed node", allowed, "model.profile", {file, lineno, 1});
    Node nd;
    nd.id = trim(parts[0]);
    nd.desc = trim(parts[1]);
    nd.line = lineno;
    int seen = 0;
    for (const std::string& field : split(parts[2], ", ")) {
      const size_t eq = field.find('=');
      const std::string key = trim(field.substr(0, eq));
      std::string value = eq == std::string::npos ? "" : trim(field.substr(eq + 1));
      double v = 0;
      bool ok = !value.empty();
      if (ok && value.front() == '[' && value.back() == ']') {  // several outputs
        for (const std::string& x : split(value.substr(1, value.size() - 2), "; ")) {
          const std::string t = trim(x);
          double part = 0;
          const auto [ptr, ec] = std::from_chars(t.data(), t.data() + t.size(), part);
          ok = ok && ec == std::errc() && ptr == t.data() + t.size() && part >= 0;
          v += part;
        }
      } else if (ok) {
        const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        ok = ec == std::errc() && ptr == value.data() + value.size() && v >= 0 && v < 1e15;
      }
      double* slot = key == "forward_compute_time"    ? &nd.fwd_ms
                     : key == "backward_compute_time" ? &nd.bwd_ms
                     : key == "activation_size"       ? &nd.activation
                     : key == "parameter_size"        ? &nd.param_bytes
                                                      : nullptr;
      if (slot == nullptr || !ok)
        throw InputError(fmt::format("'{}' is not a known field with a non-negative number",
                                     field.size() <= 60 ? field : field.substr(0, 48) + "..."),
                         allowed, "model.profile", {file, lineno, 1});
      *slot = v;
      ++seen;
    }
    if (seen != 4)
      throw InputError("a node needs all four fields", allowed, "model.profile", {file, lineno, 1});
    if (!index.emplace(nd.id, nodes.size()).second)
      throw InputError(fmt::format("node '{}' is defined twice", nd.id), "each node once",
                       "model.profile", {file, lineno, 1});
    nodes.push_back(std::move(nd));
  }
  succ.resize(nodes.size());
  indeg.resize(nodes.size());
  for (const auto& [e, lineno] : edges) {
    const auto a = index.find(e.first), b = index.find(e.second);
    if (a == index.end() || b == index.end())
      throw InputError(
          fmt::format("edge names an unknown node '{}'", a == index.end() ? e.first : e.second),
          "nodes defined on their own lines", "model.profile", {file, lineno, 1});
    succ[a->second].push_back(b->second);
    ++indeg[b->second];
  }
  // Kahn's algorithm, the earliest-defined ready node first.
  std::vector<size_t> order;
  std::priority_queue<size_t, std::vector<size_t>, std::greater<>> ready;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (indeg[i] == 0) ready.push(i);
  while (!ready.empty()) {
    const size_t i = ready.top();
    ready.pop();
    order.push_back(i);
    for (const size_t j : succ[i])
      if (--indeg[j] == 0) ready.push(j);
  }
  if (order.size() != nodes.size()) {
    for (size_t i = 0; i < nodes.size(); ++i)
      if (indeg[i] > 0)
        throw InputError(fmt::format("the graph has a cycle through node '{}'", nodes[i].id),
                         "a directed acyclic graph", "model.profile", {file, nodes[i].line, 1});
  }
  std::vector<size_t> position(nodes.size());
  for (size_t k = 0; k < order.size(); ++k) position[order[k]] = k;
  // Node i's output is live from its position to the latest position reading it.
  std::vector<double> ends_at(nodes.size());
  std::vector<char> has_pred(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    size_t last = position[i];
    for (const size_t j : succ[i]) {
      last = std::max(last, position[j]);
      has_pred[j] = 1;
    }
    ends_at[last] += nodes[i].activation;
  }
  auto bytes = [&](double v, const Node& nd) {
    if (!(v < 4e18)) too_large(fmt::format("node '{}'", nd.id));
    return static_cast<int64_t>(std::llround(v));
  };
  auto ms = [&](double v, const Node& nd) {
    if (!(v < 9e9)) too_large(fmt::format("node '{}'", nd.id));
    return Time::ps(static_cast<int64_t>(std::llround(v * 1e9)));
  };
  Model m;
  m.name = lossy_utf8(std::filesystem::path(file).stem().string());
  double live = 0;  // outputs made at or before position k and read after it
  for (size_t k = 0; k < order.size(); ++k) {
    const Node& nd = nodes[order[k]];
    live += nd.activation - ends_at[k];
    if (!has_pred[order[k]] && nd.desc.starts_with("Input")) {
      m.input_bytes += bytes(nd.activation, nd);
      continue;
    }
    Layer l;
    l.name = nd.id;
    l.forward = ms(nd.fwd_ms, nd);
    l.backward_input = ms(nd.bwd_ms, nd);
    // An in-place op (ReLU(inplace=True) and friends) overwrites its input: its output is
    // the tensor its producer already keeps.
    l.activation_bytes =
        nd.desc.find("inplace=True") != std::string::npos ? 0 : bytes(nd.activation, nd);
    l.params = bytes(nd.param_bytes / 4, nd);
    if (matrix_flops != nullptr) matrix_flops->push_back(node_matrix_flops(nd.desc, nd.activation));
    l.source = "profile";
    l.output_bytes = bytes(std::max(live, 0.0), nd);
    m.layers.push_back(std::move(l));
  }
  if (m.layers.empty())
    throw InputError("the profile graph has no layers", allowed, "model.profile", {file});
  return m;
}

}  // namespace pipesim::internal
