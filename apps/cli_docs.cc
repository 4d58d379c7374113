#include "apps/cli_docs.h"

#include <fmt/format.h>

#include <ostream>
#include <vector>

namespace pipesim {
namespace {

std::vector<const CLI::App*> commands(const CLI::App& app) {
  return app.get_subcommands([](const CLI::App*) { return true; });
}

bool is_flag(const CLI::Option* o) { return !o->get_positional() && o->get_expected_max() == 0; }

// Every spelling of a named option, long ones first: "--json", "-h".
std::vector<std::string> spellings(const CLI::Option* o) {
  std::vector<std::string> out;
  for (const std::string& l : o->get_lnames()) out.push_back("--" + l);
  for (const std::string& s : o->get_snames()) out.push_back("-" + s);
  return out;
}

// Text for roff: backslashes doubled as \e, a line's leading '.' or '\'' made literal,
// hyphens in option names kept as hyphens.
std::string roff(const std::string& text) {
  std::string out;
  bool line_start = true;
  for (const char c : text) {
    if (line_start && (c == '.' || c == '\'')) out += "\\&";
    if (c == '\\') {
      out += "\\e";
    } else if (c == '-') {
      out += "\\-";
    } else {
      out += c;
    }
    line_start = c == '\n';
  }
  return out;
}

std::string positionals(const CLI::App& cmd) {
  std::string out;
  for (const CLI::Option* o : cmd.get_options()) {
    if (!o->get_positional()) continue;
    const std::string name = o->get_name(true);
    out += o->get_required() ? fmt::format(" \\fI{}\\fR", roff(name))
                             : fmt::format(" [\\fI{}\\fR]", roff(name));
  }
  return out;
}

std::string option_items(const CLI::App& cmd) {
  std::string out;
  for (const CLI::Option* o : cmd.get_options()) {
    std::string names;
    for (const std::string& s : spellings(o))
      names += fmt::format("{}\\fB{}\\fR", names.empty() ? "" : ", ", roff(s));
    if (o->get_positional()) names = fmt::format("\\fI{}\\fR", roff(o->get_name(true)));
    if (!is_flag(o) && !o->get_positional()) names += fmt::format(" \\fI{}\\fR", o->get_type_name());
    out += fmt::format(".TP\n{}\n{}\n", names, roff(o->get_description()));
  }
  return out;
}

}  // namespace

std::string man_page(const CLI::App& app, const std::string& version) {
  std::string out = fmt::format(".TH PIPESIM 1 \"\" \"pipesim {}\" \"User Commands\"\n", version);
  std::string what = app.get_description();
  if (what.starts_with("pipesim: ")) what = what.substr(9);
  out += fmt::format(".SH NAME\npipesim \\- {}\n", roff(what));
  out += ".SH SYNOPSIS\n.B pipesim\n\\fICOMMAND\\fR [\\fIOPTIONS\\fR] [\\fISCENARIO.yaml\\fR]\n";
  out += ".br\n.B pipesim\n\\fB\\-\\-help\\fR | \\fB\\-\\-version\\fR\n";
  out += ".SH DESCRIPTION\nSimulates distributed deep-learning training (pipeline, data, tensor, "
         "context and expert parallelism, ZeRO) as a stream of events on a modelled cluster, "
         "plans strategies from simulated costs and checks itself against real runs. A "
         "scenario file gives the cluster, the model, the training and the strategy; "
         "\\fB\\-\\-set KEY=VALUE\\fR overrides any key.\n";
  out += ".SH COMMANDS\n";
  for (const CLI::App* cmd : commands(app)) {
    out += fmt::format(".SS \"pipesim {}{}\"\n{}\n", cmd->get_name(), positionals(*cmd),
                       roff(cmd->get_description()));
    out += option_items(*cmd);
  }
  out += ".SH EXIT STATUS\n"
         ".TP\n0\nsuccess\n"
         ".TP\n1\nthe simulation ran but found a problem (out of memory)\n"
         ".TP\n2\nbad input: file, YAML, schema, units or values; one line names the file, "
         "line, key and what is allowed\n"
         ".TP\n3\ninternal error\n";
  out += ".SH FILES\n"
         "Scenario examples are installed under \\fIshare/pipesim/scenarios\\fR; the README "
         "and the documents under \\fIdocs/\\fR describe every key.\n";
  return out;
}

std::string bash_completion(const CLI::App& app) {
  std::string names = "--help --version";
  std::string cases;
  for (const CLI::App* cmd : commands(app)) {
    names += " " + cmd->get_name();
    std::string opts, valued;
    for (const CLI::Option* o : cmd->get_options()) {
      for (const std::string& s : spellings(o)) {
        opts += (opts.empty() ? "" : " ") + s;
        if (!is_flag(o)) valued += (valued.empty() ? "" : "|") + s;
      }
    }
    cases += fmt::format(
        "    {})\n"
        "      opts='{}'\n"
        "      case \"$prev\" in {}) COMPREPLY=( $(compgen -f -- \"$cur\") ); return ;; esac\n"
        "      ;;\n",
        cmd->get_name(), opts, valued.empty() ? "--no-such-option" : valued);
  }
  return fmt::format(R"(# bash completion for pipesim (written by `pipesim completion bash`).
# zsh: autoload -U +X bashcompinit && bashcompinit, then source this file.
_pipesim() {{
  local cur prev opts
  cur="${{COMP_WORDS[COMP_CWORD]}}"
  prev="${{COMP_WORDS[COMP_CWORD-1]}}"
  if [[ $COMP_CWORD -eq 1 ]]; then
    COMPREPLY=( $(compgen -W '{}' -- "$cur") )
    return
  fi
  case "${{COMP_WORDS[1]}}" in
{}    *) return ;;
  esac
  if [[ "$cur" == -* ]]; then
    COMPREPLY=( $(compgen -W "$opts" -- "$cur") )
  else
    COMPREPLY=( $(compgen -f -X '!*.yaml' -- "$cur") $(compgen -d -- "$cur") )
  fi
}}
complete -o filenames -F _pipesim pipesim
)",
                     names, cases);
}

DocsCommands::DocsCommands(CLI::App& app) {
  man_ = app.add_subcommand("man", "print the manual page (roff) to standard output");
  completion_ = app.add_subcommand(
      "completion", "print a shell completion script: source <(pipesim completion bash)");
  completion_->add_option("shell", shell_, "bash or zsh (zsh through bashcompinit)")
      ->check(CLI::IsMember({"bash", "zsh"}));
}

bool DocsCommands::write(const CLI::App& app, const std::string& version,
                         std::ostream& out) const {
  if (man_->parsed()) {
    out << man_page(app, version);
    return true;
  }
  if (completion_->parsed()) {
    if (shell_ == "zsh") out << "autoload -U +X bashcompinit && bashcompinit\n";
    out << bash_completion(app);
    return true;
  }
  return false;
}

}  // namespace pipesim
