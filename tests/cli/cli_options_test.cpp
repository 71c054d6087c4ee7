// The command line as a reference: docs/cli.md is the binary's own --help
// (regenerated and compared here), and a bad option value is answered with
// the option's name, the value and what is allowed, in words.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "support/test_support.h"

using namespace deltafin;

namespace {

using test::df;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// What CLI11 prints for a refused value: our message, then its hint.
std::string refusal(const std::string& message) { return message + "\nRun with --help for more information.\n"; }

}  // namespace

TEST(CliDoc, CommittedReferenceIsTheHelp) {
  test::TempDir tmp;
  std::string out;
  const std::string script = test::source_dir() + "/scripts/gen-cli-doc.sh";
  ASSERT_EQ(test::run_command("bash " + test::shell_quote(script) + " " + test::shell_quote(test::deltafin_binary()) +
                                  " " + test::shell_quote(tmp.file("cli.md")),
                              &out),
            0)
      << out;
  const std::vector<std::string> want = lines_of(test::read_bytes(tmp.file("cli.md")));
  const std::vector<std::string> have = lines_of(test::read_bytes(test::source_dir() + "/docs/cli.md"));
  ASSERT_GT(want.size(), 100u) << "the generated reference is too short to be the help";
  size_t i = 0;
  while (i < want.size() && i < have.size() && want[i] == have[i]) ++i;
  if (i < want.size() || i < have.size())
    FAIL() << "docs/cli.md is out of date: run scripts/gen-cli-doc.sh (after building build/release/deltafin) and "
              "commit docs/cli.md. First difference at line "
           << i + 1 << ":\n  docs/cli.md: " << (i < have.size() ? have[i] : "(end of file)")
           << "\n  --help:      " << (i < want.size() ? want[i] : "(end of file)");
}

// The help does not depend on where the binary lies or on this machine.
TEST(CliDoc, HelpNamesTheCommandNotItsPath) {
  std::string out;
  ASSERT_EQ(test::run_command(df("run --help"), &out), 0) << out;
  EXPECT_NE(out.find("Usage: deltafin run [OPTIONS]"), std::string::npos) << out;
  EXPECT_EQ(out.find(test::deltafin_binary()), std::string::npos) << out;
}

TEST(CliOptions, BadValuesAreRefusedInWords) {
  struct Case {
    std::string args, message;
  };
  const std::vector<Case> cases = {
      // A whole number: negative, a fraction, text, beyond any integer.
      {"run --max-new -3", "--max-new: -3 is not allowed: give a whole number from 0 to 1000000000"},
      {"run --max-new 1.5", "--max-new: 1.5 is not a whole number: give one from 0 to 1000000000"},
      {"run --max-new abc", "--max-new: \"abc\" is not a whole number: give one from 0 to 1000000000"},
      {"run --draft-k 99999999999999999999", "--draft-k: 99999999999999999999 is not allowed: give a whole number from 0 to 7"},
      {"serve --port 65536", "--port: 65536 is not allowed: give a whole number from 0 to 65535"},
      {"setup --replicate-hot -1", "--replicate-hot: -1 is not allowed: give a whole number of at least 0"},
      {"run --threads inf", "--threads: \"inf\" is not a whole number: give one from 1 to 4096"},
      // A number: text, not finite, below, above, not above.
      {"run --cache-gb abc", "--cache-gb: \"abc\" is not a number: give one of at least 0"},
      {"run --chunk-mb nan", "--chunk-mb: \"nan\" is not a number: give one from 0.004096 to 1024"},
      {"run --cache-gb -0.5", "--cache-gb: -0.5 is not allowed: give a number of at least 0"},
      {"serve --header-timeout 3601", "--header-timeout: 3601 is not allowed: give a number from 0.05 to 3600"},
      {"setup --ram-gb 0", "--ram-gb: 0 is not allowed: give a number above 0"},
      {"setup --drive-mbps 100,-5", "--drive-mbps: -5 is not allowed: give a number above 0"},
      // One of a list.
      {"run --io x", "--io: \"x\" is not allowed: give uring or pread"},
      {"run --lookahead yes", "--lookahead: \"yes\" is not allowed: give on, off or auto"},
  };
  for (const Case& c : cases) {
    std::string out;
    const int rc = test::run_command(df(c.args), &out);
    EXPECT_NE(rc, 0) << c.args;
    EXPECT_EQ(out, refusal(c.message)) << c.args;
  }
}

// Every option that takes a number, in every subcommand's help, refuses
// text with its own name and what it takes: none is left to CLI11's own
// conversion ("Could not convert: --x = abc") or range messages.
TEST(CliOptions, EveryNumericOptionNamesItselfAndItsRange) {
  std::string top;
  ASSERT_EQ(test::run_command(df("--help"), &top), 0) << top;
  std::vector<std::string> subcommands;
  bool in_list = false;
  for (const std::string& line : lines_of(top)) {
    if (line == "Subcommands:") in_list = true;
    else if (line.empty()) in_list = false;
    else if (in_list) subcommands.push_back(line.substr(2, line.find(' ', 2) - 2));
  }
  ASSERT_GE(subcommands.size(), 12u) << top;
  const std::regex numeric(R"(^  (--[a-z-]+) (INT|UINT|FLOAT)\b)");
  const std::regex refused(R"(^(--[a-z-]+): "abc" is not a (whole )?number: give one (from \S+ to \S+|of at least \S+|above \S+)\n)");
  std::set<std::string> seen;  // an option shared by several subcommands (same help line) is run once
  for (const std::string& sub : subcommands) {
    std::string help;
    ASSERT_EQ(test::run_command(df(sub + " --help"), &help), 0) << help;
    for (const std::string& line : lines_of(help)) {
      std::smatch m;
      if (!std::regex_search(line, m, numeric) || !seen.insert(line).second) continue;
      const std::string option = m[1];
      std::string out;
      EXPECT_NE(test::run_command(df(sub + " " + option + " abc"), &out), 0) << sub << " " << option;
      std::smatch r;
      EXPECT_TRUE(std::regex_search(out, r, refused) && r[1] == option) << sub << " " << option << ":\n" << out;
    }
  }
  EXPECT_GE(seen.size(), 50u);  // run, serve, setup, bench, make-model and the rest
}

// Accepted whole numbers are read as decimal: CLI11 alone reads "010" as
// octal 8. make-model prints the seed it used.
TEST(CliOptions, WholeNumbersAreDecimal) {
  test::TempDir tmp;
  for (const auto& [given, read] : {std::pair{"010", "seed 10,"}, std::pair{"1e3", "seed 1000,"}}) {
    std::string out;
    ASSERT_EQ(test::run_command(df(std::string("make-model --quiet --force --preset tiny --seed ") + given + " --out " +
                                   tmp.file("m")),
                                &out),
              0)
        << out;
    EXPECT_NE(out.find(read), std::string::npos) << given << ": " << out;
  }
}
