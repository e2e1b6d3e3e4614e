#include "server/engine/pass_arrays.h"

#include <algorithm>
#include <tuple>

#include "server/model/stages.h"

namespace mesa_anyjev::engine {

namespace {

void FlattenLabels(const LabelsOf& labels_of, FlatPass& flat) {
  for (int64_t id : flat.ids) {
    flat.label_width = std::max(
        flat.label_width,
        static_cast<int64_t>(labels_of[static_cast<size_t>(id)]->size()));
  }
  for (int64_t id : flat.ids) {
    const std::vector<TokenId>& row = *labels_of[static_cast<size_t>(id)];
    for (int64_t k = 0; k < flat.label_width; ++k) {
      flat.labels.push_back(
          row.empty() ? 0
                      : row[static_cast<size_t>(std::min<int64_t>(
                            k, static_cast<int64_t>(row.size()) - 1))]);
    }
  }
}

}  // namespace

FlatPass Flatten(const Pass& pass, const LabelsOf* labels_of) {
  FlatPass flat;
  for (size_t s = 0; s < pass.segments.size(); ++s) {
    const Segment& seg = pass.segments[s];
    const model::SegmentKeys& keys = pass.keys.segments[s];
    for (int64_t t = 0; t < keys.length; ++t) {
      flat.tokens.push_back(seg.tokens[t]);
      flat.positions.push_back(keys.start + t);
      flat.slots.push_back(pass.keys.OwnSlot(keys, t));
    }
    for (int64_t out : seg.outputs) {
      flat.rows.push_back(static_cast<int64_t>(flat.tokens.size()) - 1);
      flat.ids.push_back(out);
    }
  }
  if (labels_of != nullptr) FlattenLabels(*labels_of, flat);
  flat.copy_from = pass.copy_from;
  flat.copy_to = pass.copy_to;
  return flat;
}

PassOutputs ReadOutputs(const model::Qwen3Model& m,
                        const model::ForwardResult& result,
                        const at::Tensor& labels, int32_t top_k) {
  PassOutputs out;
  if (!labels.defined()) {
    model::Stages stage("mesa.outputs_to_host");
    out.hidden = result.hidden.cpu().contiguous();  // one copy a pass
    return out;
  }
  const at::Tensor logprobs = m.LogSoftmax(result.final);
  model::Stages stage("mesa.outputs");
  at::Tensor at_labels = logprobs.gather(1, labels), top_values, top_ids;
  if (top_k > 0) std::tie(top_values, top_ids) = logprobs.topk(top_k);
  stage.Next("mesa.outputs_to_host");
  out.labels = at_labels.cpu();
  if (top_k > 0) {
    out.top_values = top_values.cpu();
    out.top_ids = top_ids.cpu();
  }
  return out;
}

StagedPass Stage(const FlatPass& flat, model::PassUpload& upload) {
  return {upload.Stage(flat.tokens),    upload.Stage(flat.positions),
          upload.Stage(flat.rows),      upload.Stage(flat.slots),
          upload.Stage(flat.copy_from), upload.Stage(flat.copy_to),
          upload.Stage(flat.labels)};
}

model::PackedPass Pack(const StagedPass& staged,
                       const model::PassUpload& upload) {
  model::PackedPass packed;
  packed.tokens = upload.View(staged.tokens);
  packed.positions = upload.View(staged.positions);
  packed.outputs = upload.View(staged.rows);
  packed.writes.slots = upload.View(staged.slots);
  if (staged.copy_from.size > 0) {
    packed.writes.copy_from = upload.View(staged.copy_from);
    packed.writes.copy_to = upload.View(staged.copy_to);
  }
  return packed;
}

}  // namespace mesa_anyjev::engine
