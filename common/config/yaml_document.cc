// One YAML document (see yaml_document.h).
#include "common/config/yaml_document.h"

#include <exception>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "yaml-cpp/eventhandler.h"

namespace mesa_anyjev::config {
namespace {

// Parses a document and keeps nothing: how documents are counted.
class IgnoreEvents final : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

}  // namespace

absl::StatusOr<std::optional<YAML::Node>> ParseOneYamlDocument(
    const std::string& text, const std::string& where) {
  try {
    // Counting documents with a bounded loop, not YAML::LoadAll: yaml-cpp
    // 0.7's LoadAll never returns on a stream that starts with ',' (found
    // by fuzzing); its parser then reports one document after another.
    std::istringstream stream(text);
    YAML::Parser parser(stream);
    IgnoreEvents ignore;
    int documents = 0;
    while (documents < 2 && parser.HandleNextDocument(ignore)) ++documents;
    if (documents == 0) return std::nullopt;
    if (documents > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": holds 2 or more YAML documents, not one"));
    }
    return YAML::Load(text);
  } catch (const YAML::Exception& e) {
    if (e.mark.is_null()) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": YAML error: ", e.msg));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": YAML syntax error at line ", e.mark.line + 1,
                     ", column ", e.mark.column + 1, ": ", e.msg));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", e.what()));
  }
}

}  // namespace mesa_anyjev::config
