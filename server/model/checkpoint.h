// A Hugging Face model directory as published: config.json plus either
// model.safetensors alone or model.safetensors.index.json and the shards its
// weight_map names. Every shard is mapped and validated (SafetensorsFile),
// then the index and the shards are checked against each other: every
// tensor the index lists is in the shard it names, every tensor in a shard
// is listed for that shard, and no tensor is in two shards.
//
// Files are read only from inside the directory. Shard names must be plain
// file names (no '/', not "." or ".."); a symlink (any file read, config.json
// included) must resolve inside the directory, with one exception: the
// Hugging Face hub cache, where snapshots/<revision>/<file> links to
// ../../blobs/<hash>, so a symlink of a directory whose parent is named
// "snapshots" may also resolve into that repository's blobs/ directory.
// These checks guard against a malformed or hostile directory as published;
// they do not defend against a process rewriting it while Open runs.
//
// Errors: INVALID_ARGUMENT for a malformed directory (naming the file and
// the tensor), NOT_FOUND for a missing required file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "server/model/safetensors_file.h"

namespace mesa_anyjev::model {

class Checkpoint {
 public:
  static constexpr std::string_view kConfigName = "config.json";
  static constexpr std::string_view kSingleName = "model.safetensors";
  static constexpr std::string_view kIndexName = "model.safetensors.index.json";
  // config.json and the index are small in practice (KBs); the caps only
  // keep a hostile directory from making the daemon read gigabytes.
  static constexpr int64_t kMaxConfigBytes = 16 << 20;
  static constexpr int64_t kMaxIndexBytes = SafetensorsFile::kMaxHeaderBytes;

  // Opens `dir`. Having both model.safetensors and the index is refused as
  // ambiguous rather than guessing which one the operator meant.
  static absl::StatusOr<std::unique_ptr<Checkpoint>> Open(
      const std::string& dir);

  Checkpoint(const Checkpoint&) = delete;
  Checkpoint& operator=(const Checkpoint&) = delete;

  // nullptr when no shard has a tensor of that name.
  const TensorView* Find(std::string_view name) const;
  // The shard holding `name` (for error messages), or nullptr.
  const SafetensorsFile* ShardOf(std::string_view name) const;
  // Every tensor name, sorted.
  const std::vector<std::string>& names() const { return names_; }
  // The shards, sorted by file name.
  const std::vector<std::unique_ptr<SafetensorsFile>>& shards() const {
    return shards_;
  }
  // config.json exactly as stored.
  const std::string& config_json() const { return config_json_; }
  const std::string& dir() const { return dir_; }
  // Sum of the tensors' byte sizes over all shards.
  int64_t total_bytes() const { return total_bytes_; }

  // Lower-case hex SHA-256 identifying the model's structure:
  //
  //   sha256( u64le(len(config.json)) || config.json
  //        || u64le(number of shards)
  //        || for each shard, by file name (bytewise ascending):
  //             u64le(N) || the N header bytes as stored )
  //
  // The lengths make the concatenation unambiguous. It binds config.json and
  // every safetensors header, i.e. each tensor's name, dtype, shape and
  // offsets (and the headers' __metadata__), but NOT the tensor bytes:
  // hashing 16 GB at every start would cost minutes, so two checkpoints that
  // differ only in weight values share a fingerprint. File names and the
  // index are not hashed; the headers already fix which tensors exist.
  std::string Fingerprint() const { return fingerprint_; }

 private:
  Checkpoint() = default;

  // Fills tensors_, names_ and total_bytes_ from shards_ (whose file names
  // are `shard_files`); a tensor may live in only one shard.
  absl::Status LocateTensors(const std::vector<std::string>& shard_files);
  // Every tensor the index lists is in the shard it names, and every tensor
  // of a shard is listed.
  absl::Status CheckIndex(const std::map<std::string, std::string>& weight_map,
                          const std::vector<std::string>& shard_files) const;

  struct Located {
    const TensorView* view;
    size_t shard;  // index into shards_
  };

  std::string dir_;
  std::string config_json_;
  std::vector<std::unique_ptr<SafetensorsFile>> shards_;
  absl::flat_hash_map<std::string, Located> tensors_;
  std::vector<std::string> names_;
  int64_t total_bytes_ = 0;
  std::string fingerprint_;
};

}  // namespace mesa_anyjev::model
