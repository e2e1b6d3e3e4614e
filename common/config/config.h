// The one configuration of mesa-anyjevd and mesa-anyjev: typed sections with
// defaults. Loading (YAML file < MESA_ANYJEV_<SECTION>__<FIELD> environment <
// flags) and validation live in config_loader.h.
#pragma once

#include <cstdint>
#include <string>

namespace mesa_anyjev::config {

struct ServerConfig {
  std::string listen = "127.0.0.1:50151";         // host:port; port 0 picks one
  std::string port_file;                          // write the bound port here
  std::string metrics_listen = "127.0.0.1:9464";  // host:port; "" = off
  std::string metrics_port_file;     // write the bound metrics port here
  int32_t queue_capacity = 64;       // calls held: waiting or in a pass
  double default_deadline_s = 30.0;  // for calls that carry none
  double max_deadline_s = 120.0;     // longer deadlines are cut to this
  double drain_deadline_s = 30.0;    // SIGTERM: time for accepted calls
  // SIGTERM: health reads NOT_SERVING and new calls get UNAVAILABLE for this
  // long before the listener closes, so load balancers see the drain.
  double drain_grace_s = 0.0;
  int64_t max_receive_message_bytes = 16 << 20;
  int64_t max_send_message_bytes = 64 << 20;
  int32_t max_concurrent_streams = 64;  // per connection
  bool reflection = true;               // grpc.reflection.v1alpha
  std::string tls_cert;                 // PEM; with tls_key turns TLS on
  std::string tls_key;
};

struct ModelConfig {
  // local: the model at `path`; composite (router mode): logprobs from the
  // gateway of section `backend`, hidden states from the mesa-anyjevd at
  // client.address (docs/operations.md).
  std::string backend = "local";
  std::string path = "fake";      // checkpoint directory or "fake"
  std::string name;               // model id ("Qwen/Qwen3-8B"); "" = dir name
  std::string dtype = "float32";  // float32 | bfloat16
  std::string device = "cpu";     // cpu | cuda | cuda:N
  // eager: transformers' eager attention (matmul, float32 softmax), exact;
  // sdpa: libtorch's fused scaled_dot_product_attention.
  std::string attention = "eager";
  // sdpa on CUDA: attend each prompt group's shared prefix once for all its
  // suffixes (two variable-length kernel calls merged by log-sum-exp)
  // instead of gathering it once per suffix; probed at load, off until a
  // GPU run shows it equal and faster (docs/model.md).
  bool cascade_attention = false;
  // CPU float32 projections: auto measures both below at load on the
  // model's own weights and keeps the faster; onednn packs the weights once
  // for oneDNN's matmul (falls back to aten if its probe fails); aten is
  // at::linear (MKL's sgemm), as transformers runs. Unused on CUDA.
  std::string cpu_gemm = "auto";
  // The memory-bound stages on CUDA: "aten" (the ATen composition), "fused"
  // (all of our kernels, server/model/kernels/) or a comma list of
  // add_rms_norm, qk_norm_rope, silu_mul. Ours run only on CUDA; elsewhere
  // the ATen path runs and the load log says so (docs/model.md).
  std::string kernels = "aten";
  int32_t threads = 0;        // intra-op threads; 0 = all cores
  double fake_delay_s = 0.0;  // fake model: service time per call (tests)
  double fake_load_s = 0.0;   // fake model: time to "load" (tests)
  // The fake model's temperature: another value is another model
  // ("fake-t<T>"), the pair bench compare's tests measure.
  double fake_temperature = 0.7;
};

struct EngineConfig {
  // New tokens of one forward pass, packed from every queued prompt group;
  // a longer prefix runs in chunks, a longer suffix alone.
  int64_t batch_tokens = 8192;
  // A pass planned while interactive work is held beside batch work
  // (engine.scheduler fair) holds at most this many (0 = batch_tokens): an
  // interactive call waits for the pass running and then rides this one.
  int64_t interactive_pass_tokens = 4096;
  // Passes after one that carried interactive work beside batch work that
  // stay that short while batch work leads them: an interactive caller's
  // next question tends to follow its answer at once, and then waits for
  // a short pass rather than a full one (0: the next pass is full).
  int32_t short_passes_after_interactive = 1;
  // The KV pool: keys and values of every pass and of the prefix cache,
  // in blocks of kv_block_tokens positions. Allocated once at load.
  int64_t kv_pool_bytes = int64_t{1} << 30;
  int32_t kv_block_tokens = 16;
  // Keep computed prefix blocks for reuse across calls (evicted LRU).
  bool prefix_caching = true;
  // CPU only: freed activation blocks (1 MiB and up) kept for the next
  // pass, at most this many bytes (server/engine/host_block_cache.h); 0 =
  // off, every block back to malloc.
  int64_t host_cache_bytes = int64_t{2} << 30;
  // Passes of at most this many new tokens that read logprobs are replayed
  // from CUDA graphs captured per padded shape (powers of two from 64), so a
  // small pass pays one launch instead of some 2,000; 0 = off. Needs the
  // CUDA variable-length kernel (sdpa); on the CPU the padded pass runs
  // eagerly (a test path, slower). Off until a GPU run shows it equal and
  // faster (docs/model.md).
  int64_t cuda_graph_tokens = 0;
  // Memory left free beyond the weights, the pool, the block cache, a
  // pass's activations and logits and the CUDA graphs' pool: the CUDA
  // context, the rest of the system. A load that would not leave it is
  // refused before it starts (memory_fit.h).
  int64_t memory_reserve_bytes = int64_t{2} << 30;
  // Who the engine serves next (docs/architecture.md, "Scheduling"): fair
  // (interactive work first, tenants sharing by the tokens their work
  // costs, weighted) or fifo (arrival order, as before).
  std::string scheduler = "fair";
  // Per tenant of auth.tokens_file by default (its entry may set its own):
  // calls held for the model, and their prompt tokens; 0: no limit beyond
  // server.queue_capacity. Callers without a tenant (auth off) are one
  // caller, bounded by server.queue_capacity alone.
  int32_t tenant_max_queued_calls = 16;
  int64_t tenant_max_queued_tokens = int64_t{1} << 20;
  // A file the engine appends one JSON line to per forward pass (its size
  // and whose work it held, in planning order); "" = off. For looking into
  // what the scheduler did, not for always: it grows with every pass.
  std::string pass_records;
};

struct LimitsConfig {
  int32_t max_groups = 64;
  int32_t max_suffixes = 32;
  int32_t max_prompt_tokens = 8192;
  int32_t max_total_tokens = 65536;
  int32_t max_layers = 64;
  int32_t max_top_k = 1000;
  int32_t max_label_ids = 64;
  int32_t max_texts = 256;
  int64_t max_text_bytes = 1 << 20;
  int32_t max_decide_states = 256;      // states per Decide
  int32_t max_decide_questions = 32;    // questions per Decide
  int32_t max_fit_states = 4096;        // labelled states per Fit
  int64_t max_decide_tokens = 8 << 20;  // prompt tokens per Decide or Fit
  // A bundle file (artifacts, observations, manifest), and each JSON field
  // of a Bundles request.
  int64_t max_bundle_bytes = 8 << 20;
};

// The daemon's decision engine (common/decision): its defaults and the
// artifacts it starts with.
struct DecisionsConfig {
  // A heads/export file (docs/decision.md, Heads/export file) loaded after the
  // model; a
  // file that does not load stops the daemon. "" = start with none.
  std::string artifacts;
  // Threads that run Decide and Fit, for each priority class (an
  // interactive call never waits behind batch work for a worker); each
  // waits on the engine while the model runs, so gRPC threads never do.
  // Enough that the calls pipelines keep in flight all reach the engine,
  // whose scheduler shares the passes: with fewer, a tenant between two
  // calls loses its worker to another's waiting call.
  int32_t workers = 16;
  std::string prior = "batch";   // L0 label prior: batch | content_free | none
  bool canonical_order = false;  // rotate options sorted by text
  bool adaptive_shifts = false;  // the rotation budget for choice, K >= 3
  // auto serves L2 from a head fit on a rewording or (random listing) the
  // option set too, as anyjev does; false: only from a head of this key.
  bool auto_routes_reworded = true;
  // The bundle store (docs/bundles.md) served for the daemon's own model:
  // every question's CURRENT version is loaded at start, and Promote and
  // Rollback over the Bundles service are picked up live. "auto": under
  // the state directory (systemd's StateDirectory=, else
  // $XDG_STATE_HOME/mesa-anyjev, else ~/.local/state/mesa-anyjev) in
  // bundles/; "off": none; else a path.
  std::string bundles_dir = "auto";
};

struct AuthConfig {
  // The bearer token comes from the environment variable named here, or from
  // a file readable by its owner only (mode 0600 or stricter): one tenant,
  // "default", of role admin. Never from the command line or the YAML file
  // itself.
  std::string token_env;
  std::string token_file;
  // Tenants and roles instead (docs/operations.md): a 0600 YAML file of
  // token digests, read again on SIGHUP. None of the three set = no auth.
  std::string tokens_file;
};

struct ClientConfig {
  std::string address = "127.0.0.1:50151";  // the daemon, host:port
  double timeout_s = 30.0;                  // deadline of every call
  std::string token_env;                    // as AuthConfig
  std::string token_file;
  std::string tls_ca;  // PEM of the CA that signed the daemon's cert; on = TLS
  // Whose batch priors a run's Decide calls use: "run" (this client's,
  // carried in each call, so any daemon of a pool gives the same decisions)
  // or "daemon" (the daemon's running priors of the token's tenant, shared
  // by that tenant's callers).
  std::string priors = "run";
  // The priority class the calls ask for (metadata mesa-anyjev-priority):
  // "default" (the tenant's), "interactive" or "batch". Dataset runs
  // (decide --out, bench run and compare, learn fit) ask batch unless this
  // says otherwise.
  std::string priority = "default";
  // Every call carries the metadata mesa-anyjev-affinity: a hash of the
  // first this many bytes of its first state or prompt, for a balancer that
  // hashes on it (deploy/nginx); 0 sends none.
  int32_t affinity_bytes = 256;
};

// The CLI's backend (docs/cli.md):
// fake (in process), gateway (an OpenAI-compatible server asked for top-20
// logprobs, docs/gateway.md), hf (mesa-anyjevd at client.address) or
// composite (raw/L0/L1 from the gateway, L2 from the daemon). The gateway's
// API key never comes from the YAML file or a flag: it is read from
// MESA_ANYJEV_BACKEND__GATEWAY_API_KEY, MESA_LLM_API_KEY, the variable
// named in gateway_api_key_env, or a 0600 file.
struct BackendConfig {
  std::string kind = "fake";  // fake | gateway | hf | composite
  std::string gateway_base_url = "http://127.0.0.1:8000";  // not .../v1
  std::string served_model = "carc-fast";  // "model" of gateway requests
  // The gateway model's name: the bundle key for the gateway kind.
  std::string canonical_model = "RedHatAI/Qwen3-8B-NVFP4";
  // The served model's tokenizer.json (or its directory); the reference
  // names a hub repo here, which cannot be fetched offline.
  std::string tokenizer;
  // The model the daemon at client.address must serve (hf, composite); ""
  // takes whatever it serves.
  std::string hf_model;
  std::string gateway_api_key_env;   // name of a variable holding the key
  std::string gateway_api_key_file;  // or a file with mode 0600 holding it
  std::string ca_file;               // PEM CA bundle for a private gateway
  std::string pinned_public_key;     // "sha256//<base64>;..." or a key file
  int32_t logprobs = 20;     // top-k asked for: at most the server's cap
                             // (vLLM's --max-logprobs, 20 by default)
  int32_t max_choice_k = 8;  // wider choices are refused below L2 (top-k)
  // How label logprobs are read: token_ids (vLLM's logprob_token_ids: the
  // exact value of each label whatever its rank; K up to 26), top_k (looked
  // up in the top `logprobs`; a label outside is missing), or auto (one
  // probe at start picks token_ids where the server takes it).
  std::string label_readout = "auto";
  // The liveness route: "" asks /health/liveliness (LiteLLM) and, on a
  // 404, /health (vLLM); or a path of the server's.
  std::string health_path;
  int32_t workers = 8;     // concurrent gateway requests
  double timeout = 120.0;  // seconds per gateway request
  // composite: when the gateway fails a call (UNAVAILABLE, deadline),
  // serve that question's raw/L0/L1 from the daemon instead, where a
  // current agreement record says the two models agree on it; each such
  // decision names the model that served it (docs/bundles.md).
  bool failover_to_daemon = false;
};

// The CLI's decider: the level asked for and the L0 settings of the decider
// that gateway and fake work runs on. It and decisions.* map to the
// decider's options through one function (decision::DeciderOptionsFrom), a
// key one section lacks taking the other's default, so a question decides
// alike in process and through the daemon.
// adaptive_shifts is off where the reference's config turns it on: a read
// under the rotation budget cannot use an L1 calibration's frozen prior, so
// every explicit L1 on a choice of K >= 3 would come back as L0
// (docs/reference.md, Fits freeze their prior).
struct DeciderConfig {
  std::string level = "auto";    // raw | L0 | L1 | L2 | auto
  std::string prior = "batch";   // batch | content_free | none
  bool adaptive_shifts = false;  // serving only; fits force false
  int32_t max_permutations = 0;  // 0 = every shift (the reference's null)
};

// The write policy and annotate's limits (docs/annotate.md).
struct PolicyConfig {
  std::string profile = "prod";  // prod | dev
  int32_t max_candidates = 12;   // candidate cap; children cap too
  int32_t max_avus = 25;         // kept AVUs per run
  int32_t proposal_size = 8;
  bool specificity = true;          // try more specific children
  double specificity_delta = 0.10;  // p(child) >= p(parent) + delta
  bool audit_planner = true;        // ask dataset.ontology_applies (Q0)
};

// The bundle store (docs/bundles.md).
struct ArtifactsConfig {
  std::string dir = "~/.mesa/anyjev/artifacts";
  bool strict = true;  // refuse bundles fit on another backend kind
};

// bench compare (docs/learning.md): when two models count as agreeing on a
// question, and the bootstrap behind the accuracy difference's interval.
struct CompareConfig {
  double max_flip = 0.10;      // the flip rate's Wilson upper bound, at most
  double max_acc_diff = 0.03;  // |accuracy difference| interval bound
  int32_t resamples = 2000;    // bootstrap resamples of the states
  int32_t seed = 0;            // numpy RandomState seed of the resamples
};

// The label store (docs/learning.md).
struct LabelsConfig {
  std::string dir = "~/.mesa/anyjev/labels";  // holds labels.jsonl
};

struct LogConfig {
  std::string level = "info";  // trace | debug | info | warn | error
};

struct Config {
  ServerConfig server;
  ModelConfig model;
  EngineConfig engine;
  LimitsConfig limits;
  DecisionsConfig decisions;
  AuthConfig auth;
  ClientConfig client;
  BackendConfig backend;
  DeciderConfig decider;
  PolicyConfig policy;
  ArtifactsConfig artifacts;
  CompareConfig compare;
  LabelsConfig labels;
  LogConfig log;
};

}  // namespace mesa_anyjev::config
