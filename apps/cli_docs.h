// The manual page and the shell completion, written from the command line's own
// definitions (the CLI11 tree run_cli builds), so they list exactly the commands and
// options the program accepts: `pipesim man`, `pipesim completion bash|zsh`.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

namespace pipesim {

// A man(7) page: name, synopsis, every command with its arguments and options, exit status.
std::string man_page(const CLI::App& app, const std::string& version);

// A bash completion script (zsh loads it through bashcompinit): commands, each command's
// options, scenario files for the positional argument, file names after options that
// take a value.
std::string bash_completion(const CLI::App& app);

// Adds the `man` and `completion` commands to `app`; after parsing, `write` prints what
// was asked for and returns true, or returns false when neither was given.
class DocsCommands {
 public:
  explicit DocsCommands(CLI::App& app);
  bool write(const CLI::App& app, const std::string& version, std::ostream& out) const;

 private:
  CLI::App* man_ = nullptr;
  CLI::App* completion_ = nullptr;
  std::string shell_ = "bash";
};

}  // namespace pipesim
