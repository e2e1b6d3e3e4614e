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

}  // namespace

absl::StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::Open(
    const std::string& dir) {
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

  std::unique_ptr<Checkpoint> checkpoint(new Checkpoint());
  checkpoint->dir_ = dir;
  const std::string config_name(kConfigName);
  ASSIGN_OR_RETURN(const std::string config_path,
                   Resolve(root, config_name, config_name));
  ASSIGN_OR_RETURN(
      checkpoint->config_json_,
      util::ReadFile(config_path, {.max_bytes = kMaxConfigBytes,
                                   .limit_name = "the config.json cap"}));

  // Which shards, and (when sharded) which tensor each must hold.
  const std::string single_name(kSingleName);
  const std::string index_name(kIndexName);
  const bool has_single = Exists((real / single_name).string());
  const bool has_index = Exists((real / index_name).string());
  if (has_single && has_index) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": both ", single_name, " and ", index_name,
                     " are present; keep the one to serve"));
  }
  if (!has_single && !has_index) {
    return absl::NotFoundError(absl::StrCat(
        dir, ": neither ", single_name, " nor ", index_name, " is present"));
  }
  std::optional<std::map<std::string, std::string>> weight_map;
  std::set<std::string> shard_names;  // sorted: the fingerprint's order
  if (has_index) {
    ASSIGN_OR_RETURN(const std::string index_path,
                     Resolve(root, index_name, index_name));
    ASSIGN_OR_RETURN(
        const std::string index_text,
        util::ReadFile(index_path, {.max_bytes = kMaxIndexBytes,
                                    .limit_name = "the index cap"}));
    ASSIGN_OR_RETURN(weight_map, ParseIndex(index_text, index_path));
    for (const auto& [tensor, file] : *weight_map) {
      shard_names.insert(file);
    }
  } else {
    shard_names.insert(single_name);
  }

  // Map and validate every shard; a tensor may live in only one.
  std::vector<std::string> shard_files;  // parallel to shards_
  for (const std::string& name : shard_names) {
    const std::string what = has_index
                                 ? absl::StrCat("shard '", Printable(name),
                                                "' (named in ", index_name, ")")
                                 : name;
    ASSIGN_OR_RETURN(const std::string path, Resolve(root, name, what));
    ASSIGN_OR_RETURN(auto shard, SafetensorsFile::Open(path));
    checkpoint->shards_.push_back(std::move(shard));
    shard_files.push_back(name);
  }
  std::map<const SafetensorsFile*, const std::string*> file_of;
  for (size_t i = 0; i < shard_files.size(); ++i) {
    file_of[checkpoint->shards_[i].get()] = &shard_files[i];
  }
  for (size_t i = 0; i < checkpoint->shards_.size(); ++i) {
    const SafetensorsFile* shard = checkpoint->shards_[i].get();
    for (const TensorView& view : shard->tensors()) {
      const auto [it, inserted] =
          checkpoint->tensors_.emplace(view.name, Located{&view, shard});
      if (!inserted) {
        return absl::InvalidArgumentError(
            absl::StrCat(dir, ": tensor '", Printable(view.name),
                         "' is in both ", Printable(*file_of[it->second.shard]),
                         " and ", Printable(shard_files[i])));
      }
    }
    checkpoint->total_bytes_ += static_cast<int64_t>(shard->data_bytes());
  }

  if (weight_map.has_value()) {
    for (const auto& [tensor, file] : *weight_map) {
      const auto it = checkpoint->tensors_.find(tensor);
      if (it == checkpoint->tensors_.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir, ": tensor '", Printable(tensor), "' is listed in ", index_name,
            " for ", Printable(file), " but ", Printable(file),
            " does not have it"));
      }
      const std::string& actual = *file_of[it->second.shard];
      if (actual != file) {
        return absl::InvalidArgumentError(absl::StrCat(
            dir, ": tensor '", Printable(tensor), "' is listed in ", index_name,
            " for ", Printable(file), " but is in ", Printable(actual)));
      }
    }
    for (size_t i = 0; i < checkpoint->shards_.size(); ++i) {
      for (const TensorView& view : checkpoint->shards_[i]->tensors()) {
        if (weight_map->find(view.name) == weight_map->end()) {
          return absl::InvalidArgumentError(absl::StrCat(
              dir, ": tensor '", Printable(view.name), "' in ",
              Printable(shard_files[i]), " is not listed in ", index_name));
        }
      }
    }
  }
  if (checkpoint->tensors_.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": the checkpoint holds no tensors"));
  }

  checkpoint->names_.reserve(checkpoint->tensors_.size());
  for (const auto& [name, located] : checkpoint->tensors_) {
    checkpoint->names_.push_back(name);
  }
  std::sort(checkpoint->names_.begin(), checkpoint->names_.end());

  // The fingerprint, in the order checkpoint.h documents (shards_ is
  // already sorted by file name).
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int digest_size = 0;
  if (ctx == nullptr || EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr) != 1) {
    EVP_MD_CTX_free(ctx);
    return absl::InternalError("cannot initialise SHA-256");
  }
  HashBytes(ctx, checkpoint->config_json_);
  HashU64(ctx, checkpoint->shards_.size());
  for (const auto& shard : checkpoint->shards_) {
    HashBytes(ctx, shard->header());
  }
  EVP_DigestFinal_ex(ctx, digest.data(), &digest_size);
  EVP_MD_CTX_free(ctx);
  static constexpr char kHex[] = "0123456789abcdef";
  for (unsigned int i = 0; i < digest_size; ++i) {
    checkpoint->fingerprint_.push_back(kHex[digest[i] >> 4]);
    checkpoint->fingerprint_.push_back(kHex[digest[i] & 0xF]);
  }
  return checkpoint;
}

const TensorView* Checkpoint::Find(std::string_view name) const {
  const auto it = tensors_.find(absl::string_view(name.data(), name.size()));
  return it == tensors_.end() ? nullptr : it->second.view;
}

const SafetensorsFile* Checkpoint::ShardOf(std::string_view name) const {
  const auto it = tensors_.find(absl::string_view(name.data(), name.size()));
  return it == tensors_.end() ? nullptr : it->second.shard;
}

}  // namespace mesa_anyjev::model
