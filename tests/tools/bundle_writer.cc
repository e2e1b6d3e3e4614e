// bundle_writer: drives a BundleStore for the crash-safety test.
//
//   bundle_writer loop  --root DIR --question Q [--pad BYTES]
//       put a version, promote it (every third step: roll back instead),
//       forever; the test SIGKILLs it at random moments.
//   bundle_writer check --root DIR --question Q
//       open the store (removing dead writers' temporaries), verify every
//       version and pointer, put and read back one more version; prints one
//       JSON line {"versions", "current", "bad", "put"} and exits 0 when
//       nothing is bad, 1 otherwise.
//   bundle_writer put   --root DIR --question Q [--identity I] [--acc A]
//                       [--ece E] [--no-loco]
//                       [--model M --artifacts-file F --manifest-file F]
//       one version (for the CLI tests), its number on stdout; with the
//       files, exactly those artifacts and manifest extra.
//
// The model is "fake" with --identity (default the fake model's own), the
// lock sha --lock (default 0190586d...).
#include <CLI/CLI.hpp>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/bundles/bundle_store.h"
#include "common/fake_backend.h"

namespace {

using mesa_anyjev::bundles::BundleStore;
using mesa_anyjev::bundles::Json;

Json Artifacts(const std::string& key, double temperature, size_t pad) {
  Json file;
  file["model"] = "fake";
  file["artifacts"][key] = {{"method", "temperature"},
                            {"temperature", temperature},
                            {"question", key}};
  file["heads"] = Json::object();
  // Bulk, so a kill often lands inside a write.
  if (pad > 0) file["padding"] = std::string(pad, 'p');
  return file;
}

Json Extra(const std::string& question, const std::string& key,
           std::optional<std::pair<double, double>> loco) {
  Json extra;
  extra["per_question"][question] = {{"key", key}, {"level", "L1"}};
  if (loco.has_value()) {
    extra["validation"][question]["loco"] = {{"acc", loco->first},
                                             {"ece", loco->second}};
  }
  extra["fitted_on"] = {{"backend_kind", "fake"}, {"served_model", "fake"}};
  return extra;
}

int Fail(const absl::Status& status) {
  std::cerr << "bundle_writer: " << status.ToString() << "\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"bundle store driver for the crash-safety and CLI tests"};
  app.require_subcommand(1);
  std::string root, question = "term.fits", key = "7a1b2c3d4e5f6a7b";
  std::string identity = mesa_anyjev::FakeBackend().identity().identity;
  std::string lock = "0190586d0190586d0190586d0190586d";
  size_t pad = 64 << 10;
  double acc = 0.8, ece = 0.1;
  bool no_loco = false;
  std::string model = "fake", artifacts_file, manifest_file;
  for (CLI::App* sub : {app.add_subcommand("loop"), app.add_subcommand("check"),
                        app.add_subcommand("put")}) {
    sub->add_option("--root", root)->required();
    sub->add_option("--question", question);
    sub->add_option("--key", key);
    sub->add_option("--identity", identity);
    sub->add_option("--lock", lock);
    sub->add_option("--pad", pad);
    sub->add_option("--acc", acc);
    sub->add_option("--ece", ece);
    sub->add_flag("--no-loco", no_loco);
    sub->add_option("--model", model);
    sub->add_option("--artifacts-file", artifacts_file);
    sub->add_option("--manifest-file", manifest_file);
  }
  CLI11_PARSE(app, argc, argv);
  const std::string mode = app.get_subcommands().front()->get_name();

  auto opened = BundleStore::Open(root, {model, identity}, lock);
  if (!opened.ok()) return Fail(opened.status());
  BundleStore& store = **opened;

  if (mode == "put" && !artifacts_file.empty()) {
    std::ifstream a(artifacts_file), m(manifest_file);
    auto n = store.Put(Json::parse(a), Json::parse(m));
    if (!n.ok()) return Fail(n.status());
    std::cout << *n << "\n";
    return 0;
  }
  if (mode == "put") {
    auto loco = no_loco ? std::nullopt
                        : std::optional<std::pair<double, double>>({acc, ece});
    auto n = store.Put(Artifacts(key, 1.5, 0), Extra(question, key, loco));
    if (!n.ok()) return Fail(n.status());
    std::cout << *n << "\n";
    return 0;
  }
  if (mode == "loop") {
    // Figures improve with every version so each promote passes the gate.
    for (int step = 0;; ++step) {
      auto versions = store.Versions();
      if (!versions.ok()) return Fail(versions.status());
      const int n = versions->empty() ? 1 : versions->back() + 1;
      auto put =
          store.Put(Artifacts(key, 1.0 + n * 0.01, pad),
                    Extra(question, key, {{0.5 + n * 1e-4, 0.2 - n * 1e-5}}));
      if (!put.ok()) return Fail(put.status());
      absl::Status moved = step % 3 == 2
                               ? store.Rollback(question).status()
                               : store.Promote(*put, question, false).status();
      if (!moved.ok() && !absl::IsFailedPrecondition(moved)) {
        return Fail(moved);
      }
    }
  }

  // check
  Json report;
  report["bad"] = Json::array();
  auto versions = store.Versions();
  if (!versions.ok()) return Fail(versions.status());
  report["versions"] = *versions;
  for (const int n : *versions) {
    if (auto got = store.Get(n); !got.ok()) {
      report["bad"].push_back(std::string(got.status().message()));
    }
  }
  auto current = store.CurrentAll();
  if (!current.ok()) return Fail(current.status());
  report["current"] = Json::object();
  for (const auto& [id, n] : *current) {
    report["current"][id] = n;
    if (auto got = store.Get(n); !got.ok()) {
      report["bad"].push_back(absl::StrCat(
          "pointer ", id, ": ", std::string(got.status().message())));
    }
  }
  auto put = store.Put(Artifacts(key, 9.0, 0), Extra(question, key, {}));
  report["put"] = put.ok() ? Json(*put) : Json(put.status().ToString());
  if (put.ok() && !store.Get(*put).ok()) report["bad"].push_back("new put");
  std::cout << report.dump() << "\n";
  return report["bad"].empty() && put.ok() ? 0 : 1;
}
