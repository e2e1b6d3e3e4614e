// The file names of a bundle store's lock directory (bundle_store.h draws
// the layout), shared by the store's writing side and its serving side.
#pragma once

namespace mesa_anyjev::bundles {

inline constexpr char kArtifacts[] = "artifacts.json";
inline constexpr char kObservations[] = "observations.json";
inline constexpr char kManifest[] = "manifest.json";
inline constexpr char kCurrentDir[] = "current";
inline constexpr char kLockQuestions[] = "questions.json";

}  // namespace mesa_anyjev::bundles
