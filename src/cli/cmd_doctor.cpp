// deltafin doctor: check a store against its manifest.
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "store/doctor.h"
#include "util/error.h"
#include "util/progress.h"

namespace deltafin::cli {

namespace {

struct DoctorArgs {
  std::string store;
  bool full = false, quiet = false;
  int threads = 1;
};

constexpr size_t kMaxListed = 1000;  // a missing drive of a K3 store would otherwise list 20,000 lines

// Files the manifest does not name: path and size each, then the total and
// what to do about them. They do not change the exit status (see DoctorReport).
void print_strays(const DoctorReport& r) {
  if (r.strays.empty()) return;
  bool temporaries = false;
  for (size_t i = 0; i < r.strays.size(); ++i) {
    const StrayFile& f = r.strays[i];
    temporaries = temporaries || f.temporary;
    if (i < kMaxListed)
      std::printf("stray: %s: %llu bytes%s\n", f.path.c_str(), static_cast<unsigned long long>(f.bytes),
                  f.temporary ? " (a temporary file)" : "");
  }
  if (r.strays.size() > kMaxListed) std::printf("... and %zu more stray files\n", r.strays.size() - kMaxListed);
  std::printf("%zu stray file%s, %llu bytes (%s) in all: store.json does not name them, so no run reads them; they "
              "only take space.%s\n",
              r.strays.size(), r.strays.size() == 1 ? "" : "s", static_cast<unsigned long long>(r.stray_bytes()),
              human_bytes(static_cast<double>(r.stray_bytes())).c_str(),
              temporaries ? " A temporary file is an interrupted write's (or, while a setup, run or serve writes this "
                            "store, one in progress); the next setup of the store removes them."
                          : "");
}

int run(const DoctorArgs& a) {
  DoctorReport r = run_doctor(a.store, a.full, !a.quiet, a.threads);
  for (size_t i = 0; i < r.problems.size() && i < kMaxListed; ++i) std::printf("problem: %s\n", r.problems[i].c_str());
  if (r.problems.size() > kMaxListed) std::printf("... and %zu more problems\n", r.problems.size() - kMaxListed);
  print_strays(r);
  if (r.not_fetched)
    std::printf("streamed store: %llu expert files not fetched from the mirror yet (fetched on first use or by `deltafin prefetch`)\n",
                static_cast<unsigned long long>(r.not_fetched));
  const std::string strays =
      r.strays.empty() ? "" : cat(", ", r.strays.size(), " stray file", r.strays.size() == 1 ? "" : "s");
  std::printf("doctor %s: %llu files checked%s, %zu problem%s%s%s\n", a.store.c_str(),
              static_cast<unsigned long long>(r.files_checked),
              a.full ? (", " + human_bytes(static_cast<double>(r.bytes_hashed)) + " hashed").c_str() : " (sizes only; --full hashes)",
              r.problems.size(), r.problems.size() == 1 ? "" : "s", strays.c_str(), r.ok() ? ": the store is OK" : "");
  return r.ok() ? 0 : 1;
}

}  // namespace

Command add_doctor(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  CLI::App* sub = app.add_subcommand("doctor", "Check a store: manifest, spine and expert files (--full: every SHA-256)");
  sub->footer(R"(Checks the manifest, the copied files, spine and expert files (presence, size); --full also every
SHA-256. Lists every problem (layer, expert, drive, path; the first 1,000) and exits 1 if there is any.
For a streamed store, experts not fetched yet are counted (not a problem) and fetched ones are checked
against the hash recorded at their first fetch.
Also lists stray files, path and size and a total: files under a drive's deltafin-experts or in spine/
that store.json does not name, and temporaries (*.tmp-<pid>) in the store directory, remote/ and the
drives' directories. They are not problems (exit 0): no run reads them, they only take space. The next
setup removes the temporaries (a killed writer's, unless a setup, run or serve is writing the store
now); other strays can be deleted by hand.)");
  sub->add_option("--store", a->store, "Store directory")->required();
  sub->add_flag("--full", a->full, "Hash every spine and expert file");
  sub->add_option("--threads", a->threads, "Hashing threads for --full")
      ->transform(whole_number(1, kMaxThreads))
      ->capture_default_str();
  sub->add_flag("--quiet", a->quiet, "No progress line");
  return {sub, [a] { return run(*a); }};
}

}  // namespace deltafin::cli
