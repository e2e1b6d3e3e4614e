// Opening order: the directory, config.json, the index (if any), then every
// shard, then the cross-checks between index and shards, then the
// fingerprint. The index's "metadata" (total_size, ...) is not checked:
// writers have computed it differently across transformers versions, and the
// shards' own headers are authoritative.
#include "server/model/checkpoint.h"

#include <fcntl.h>
#include <openssl/evp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <filesystem>
#include <map>
#include <optional>
#include <set>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/status/status_macros.h"
#include "common/text/strict_json.h"
#include "common/text/utf8.h"
#include "common/util/files.h"
#include "nlohmann/json.hpp"

namespace mesa_anyjev::model {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using text::Printable;

// Nesting an index needs: {"weight_map": {name: file}} is two levels.
constexpr int kMaxIndexDepth = 16;

// Where files may come from: the directory itself, and for a Hugging Face
// hub cache snapshot, the repository's blobs/ (see checkpoint.h).
struct Root {
  std::string dir;                   // as the caller gave it, for messages
  std::string real;                  // canonical
  std::optional<std::string> blobs;  // canonical, hub cache only
};

bool IsUnder(const std::string& path, const std::string& root) {
  if (root == "/") {
    return path.size() > 1 && path.front() == '/';
  }
  return path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
         path[root.size()] == '/';
}

bool IsPlainName(std::string_view name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string_view::npos &&
         name.find('\0') == std::string_view::npos;
}

bool Exists(const std::string& path) {
  struct stat st {};
  return lstat(path.c_str(), &st) == 0;
}

// The path of `name` inside root, after checking that it exists and, if it
// is a symlink, that it resolves inside the allowed places. `what` describes
// the file for messages ("config.json", "shard 'x' (named in ...)").
absl::StatusOr<std::string> Resolve(const Root& root, const std::string& name,
                                    std::string_view what) {
  const std::string path = (fs::path(root.dir) / name).string();
  struct stat st {};
  if (lstat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT) {
      return absl::NotFoundError(
          absl::StrCat(root.dir, ": ", std::string(what), " is missing"));
    }
    return absl::ErrnoToStatus(err, absl::StrCat("cannot stat ", path));
  }
  if (!S_ISLNK(st.st_mode)) {
    return path;
  }
  std::error_code ec;
  const std::string target = fs::canonical(path, ec).string();
  if (ec) {
    return absl::NotFoundError(absl::StrCat(root.dir, ": ", std::string(what),
                                            " is a symlink that does not "
                                            "resolve: ",
                                            ec.message()));
  }
  if (IsUnder(target, root.real) ||
      (root.blobs.has_value() && IsUnder(target, *root.blobs))) {
    return path;
  }
  return absl::InvalidArgumentError(
      absl::StrCat(root.dir, ": ", std::string(what), " is a symlink to ",
                   target, ", outside the model directory"));
}

// weight_map of an index: tensor name -> shard file name, both checked.
absl::StatusOr<std::map<std::string, std::string>> ParseIndex(
    const std::string& text, const std::string& where) {
  auto index_error = [&where](auto&&... parts) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", parts...));
  };
  auto parsed = text::ParseStrictJson(
      text, {.max_bytes = text.size(),  // read through a bounded reader
             .max_bytes_name = "the index size",
             .max_depth = kMaxIndexDepth});
  if (!parsed.ok()) {
    return index_error(parsed.status().message());
  }
  if (!parsed->is_object()) {
    return index_error("not a JSON object");
  }
  const auto it = parsed->find("weight_map");
  if (it == parsed->end() || !it->is_object()) {
    return index_error("no weight_map object");
  }
  std::map<std::string, std::string> weight_map;
  for (auto entry = it->begin(); entry != it->end(); ++entry) {
    if (!entry->is_string()) {
      return index_error("weight_map entry '", Printable(entry.key()),
                         "' is not a file name string");
    }
    const auto& file = entry->get_ref<const std::string&>();
    if (!IsPlainName(file)) {
      return index_error("weight_map entry '", Printable(entry.key()),
                         "' names '", Printable(file),
                         "', not a plain file name inside the directory");
    }
    weight_map.emplace(entry.key(), file);
  }
  return weight_map;
}

void HashU64(EVP_MD_CTX* ctx, uint64_t value) {
  std::array<unsigned char, 8> bytes{};
  for (size_t i = 0; i < bytes.size(); ++i) {
    bytes[i] = static_cast<unsigned char>(value >> (8 * i));
  }
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
}

void HashBytes(EVP_MD_CTX* ctx, std::string_view bytes) {
  HashU64(ctx, bytes.size());
  EVP_DigestUpdate(ctx, bytes.data(), bytes.size());
}

// Which files hold the weights: model.safetensors alone, or the shards an
// index names, sorted by file name (the fingerprint's order), with the
// index's tensor -> file map they must agree with.
struct Layout {
  std::vector<std::string> shard_files;
  std::optional<std::map<std::string, std::string>> weight_map;
};

// `dir` made canonical, with the hub cache's blobs/ when it is a snapshot.
absl::StatusOr<Root> FindRoot(const std::string& dir) {
  std::error_code ec;
  const fs::path real = fs::canonical(dir, ec);
  if (ec) {
    return absl::NotFoundError(
        absl::StrCat("model directory ", dir, ": ", ec.message()));
  }
  if (!fs::is_directory(real, ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("model directory ", dir, ": not a directory"));
  }
  Root root{.dir = dir, .real = real.string(), .blobs = std::nullopt};
  if (real.parent_path().filename() == "snapshots") {
    const fs::path blobs =
        fs::canonical(real.parent_path().parent_path() / "blobs", ec);
    if (!ec) {
      root.blobs = blobs.string();
    }
  }
  return root;
}

absl::StatusOr<std::string> ReadConfig(const Root& root) {
  const std::string name(Checkpoint::kConfigName);
  ASSIGN_OR_RETURN(const std::string path, Resolve(root, name, name));
  return util::ReadFile(path, {.max_bytes = Checkpoint::kMaxConfigBytes,
                               .limit_name = "the config.json cap"});
}

absl::StatusOr<std::map<std::string, std::string>> ReadIndex(const Root& root) {
  const std::string name(Checkpoint::kIndexName);
  ASSIGN_OR_RETURN(const std::string path, Resolve(root, name, name));
  ASSIGN_OR_RETURN(
      const std::string text,
      util::ReadFile(path, {.max_bytes = Checkpoint::kMaxIndexBytes,
                            .limit_name = "the index cap"}));
  return ParseIndex(text, path);
}

// Exactly one of model.safetensors and the index must be there; having
// both is refused as ambiguous rather than guessing which one to serve.
absl::StatusOr<Layout> FindLayout(const Root& root) {
  const std::string single_name(Checkpoint::kSingleName);
  const std::string index_name(Checkpoint::kIndexName);
  const bool has_single = Exists((fs::path(root.real) / single_name).string());
  const bool has_index = Exists((fs::path(root.real) / index_name).string());
  if (has_single && has_index) {
    return absl::InvalidArgumentError(
        absl::StrCat(root.dir, ": both ", single_name, " and ", index_name,
                     " are present; keep the one to serve"));
  }
  if (!has_single && !has_index) {
    return absl::NotFoundError(absl::StrCat(root.dir, ": neither ", single_name,
                                            " nor ", index_name,
                                            " is present"));
  }
  if (has_single) {
    return Layout{.shard_files = {single_name}, .weight_map = std::nullopt};
  }
  ASSIGN_OR_RETURN(auto weight_map, ReadIndex(root));
  std::set<std::string> files;
  for (const auto& [tensor, file] : weight_map) {
    files.insert(file);
  }
  return Layout{.shard_files = {files.begin(), files.end()},
                .weight_map = std::move(weight_map)};
}

// Maps and validates every shard of `layout`, in its order.
absl::StatusOr<std::vector<std::unique_ptr<SafetensorsFile>>> OpenShards(
    const Root& root, const Layout& layout) {
  std::vector<std::unique_ptr<SafetensorsFile>> shards;
  for (const std::string& name : layout.shard_files) {
    const std::string what =
        layout.weight_map.has_value()
            ? absl::StrCat("shard '", Printable(name), "' (named in ",
                           std::string(Checkpoint::kIndexName), ")")
            : name;
    ASSIGN_OR_RETURN(const std::string path, Resolve(root, name, what));
    ASSIGN_OR_RETURN(auto shard, SafetensorsFile::Open(path));
    shards.push_back(std::move(shard));
  }
  return shards;
}

// The fingerprint as checkpoint.h defines it; `shards` sorted by file name.
absl::StatusOr<std::string> HashStructure(
    const std::string& config_json,
    const std::vector<std::unique_ptr<SafetensorsFile>>& shards) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    return absl::InternalError("cannot initialise SHA-256");
  }
  HashBytes(ctx, config_json);
  HashU64(ctx, shards.size());
  for (const auto& shard : shards) {
    HashBytes(ctx, shard->header());
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_size = 0;
  EVP_DigestFinal_ex(ctx, digest.data(), &digest_size);
  EVP_MD_CTX_free(ctx);
  return absl::BytesToHexString(absl::string_view(
      reinterpret_cast<const char*>(digest.data()), digest_size));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(
    const std::string& dir) {
  ASSIGN_OR_RETURN(const Root root, FindRoot(dir));
  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->dir_ = dir;
  ASSIGN_OR_RETURN(checkpoint->config_json_, ReadConfig(root));
  ASSIGN_OR_RETURN(const Layout layout, FindLayout(root));
  ASSIGN_OR_RETURN(checkpoint->shards_, OpenShards(root, layout));
  RETURN_IF_ERROR(checkpoint->LocateTensors(layout.shard_files));
  if (layout.weight_map.has_value()) {
    RETURN_IF_ERROR(
        checkpoint->CheckIndex(*layout.weight_map, layout.shard_files));
  }
  if (checkpoint->tensors_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the checkpoint holds no tensors"));
  }
  ASSIGN_OR_RETURN(
      checkpoint->fingerprint_,
      HashStructure(checkpoint->config_json_, checkpoint->shards_));
  return checkpoint;
}

absl::Status Checkpoint::LocateTensors(
    const std::vector<std::string>& shard_files) {
  for (size_t i = 0; i < shards_.size(); ++i) {
    for (const TensorView& view : shards_[i]->tensors()) {
      const auto [it, inserted] =
          tensors_.emplace(view.name, Located{&view, i});
      if (!inserted) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir_, ": tensor '", Printable(view.name), "' is in both ",
            Printable(shard_files[it->second.shard]), " and ",
            Printable(shard_files[i])));
      }
    }
    total_bytes_ += static_cast<int64_t>(shards_[i]->data_bytes());
  }
  names_.reserve(tensors_.size());
  for (const auto& [name, located] : tensors_) {
    names_.push_back(name);
  }
  std::sort(names_.begin(), names_.end());
  return absl::OkStatus();
}

absl::Status Checkpoint::CheckIndex(
    const std::map<std::string, std::string>& weight_map,
    const std::vector<std::string>& shard_files) const {
  const std::string index_name(kIndexName);
  for (const auto& [tensor, file] : weight_map) {
    const auto it = tensors_.find(tensor);
    if (it == tensors_.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat(dir_, ": tensor '", Printable(tensor), "' is listed in ",
                       index_name, " for ", Printable(file), " but ",
                       Printable(file), " does not have it"));
    }
    const std::string& actual = shard_files[it->second.shard];
    if (actual != file) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir_, ": tensor '", Printable(tensor), "' is listed in ", index_name,
          " for ", Printable(file), " but is in ", Printable(actual)));
    }
  }
  for (size_t i = 0; i < shards_.size(); ++i) {
    for (const TensorView& view : shards_[i]->tensors()) {
      if (weight_map.find(view.name) == weight_map.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir_, ": tensor '", Printable(view.name), "' in ",
            Printable(shard_files[i]), " is not listed in ", index_name));
      }
    }
  }
  return absl::OkStatus();
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  const auto it = tensors_.find(absl::string_view(name.data(), name.size()));
  return it == tensors_.end() ? nullptr : it->second.view;
}

const SafetensorsFile* Checkpoint::ShardOf(std::string_view name) const {
  const auto it = tensors_.find(absl::string_view(name.data(), name.size()));
  return it == tensors_.end() ? nullptr : shards_[it->second.shard].get();
}

}  // namespace mesa_anyjev::model
