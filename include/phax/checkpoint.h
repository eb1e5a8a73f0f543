// phax checkpoints: a trained model on disk and the training state that resumes it
// (the deterministic schedules a resumed run must reproduce: phax/schedule.h).
//
// Core only: the model is handed over as float parameters + layout + config,
// so any backend (fast/cpu and fast/cuda float32, ref float64) can save
// and load through this file without this module depending on it.
//
// Files of a checkpoint named <stem> (docs/train.md):
//   <stem>.safetensors        the model: every parameter in F32 under its layout
//                             name (docs/spec.md §3.6), metadata
//                               "format"      "phax-checkpoint-1"
//                               "config"      the resolved config JSON
//                               "vocab"       vocab file name, relative to the
//                                             checkpoint's directory
//                               "vocab_hash"  16 hex digits, phax_vocab_hash
//                               "step", "tokens_seen", "train_batch",
//                               "train_seq"   decimal integers (0 = unknown)
//   <stem>.vocab              the vocabulary (phax_vocab_save)
//   <stem>.state.safetensors  the training state: AdamW moments "m.<param>",
//                             "v.<param>" (F32, or F64 with the float64 master
//                             parameters "p.<param>" for the ref backend), and
//                             metadata "format" "phax-train-state-1", "step",
//                             "options", "rng", "data" (JSON strings owned by
//                             the trainer; this module stores them verbatim).
// Every write is atomic (temporary file + rename). A trainer saves whole
// generations (phax_ckpt_save_generation, below), so the three files always
// belong together; the state and model still carry the same step, and a reader
// that finds two different steps knows the pair is torn (phax_ckpt_state_check).
//
// Every function returns PHAX_OK or PHAX_ERR with a one-line message in
// phax_error() that starts with the file concerned.
#ifndef PHAX_CHECKPOINT_H
#define PHAX_CHECKPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "phax/core.h"
#include "phax/model.h"
#include "phax/safetensors.h"
#include "phax/tokenizer.h"

#define PHAX_CKPT_FORMAT "phax-checkpoint-1"
#define PHAX_CKPT_STATE_FORMAT "phax-train-state-1"

// A model checkpoint. Filled by phax_ckpt_load (which owns every pointer;
// release with phax_ckpt_free). To save, a caller fills cfg, layout, params,
// vocab and the counters with pointers it owns and calls phax_ckpt_save; it
// must then not call phax_ckpt_free on that struct.
typedef struct {
    char *path;             // the model file (load only)
    char *vocab_path;       // the vocabulary file beside it (load only)
    phax_model_cfg cfg;     // resolved
    phax_layout layout;     // of cfg
    float *params;          // (layout.numel) in layout order
    phax_vocab *vocab;
    int64_t step;           // optimizer steps taken
    int64_t tokens_seen;    // training tokens consumed (step × B × T)
    int train_batch;        // B and T the model was trained with (0 = unknown)
    int train_seq;
} phax_ckpt;

// The files of a checkpoint: "<dir>/<stem>.safetensors" is the model file;
// path may also name a directory, which means "<dir>/checkpoint.safetensors"
// (a run folder of `phax train`). A symlink (a run folder's pointer to its
// current generation, below) is followed, so the state and vocabulary are
// those beside the file it points to. Results are malloc'd (free()), NULL on
// out of memory.
#define PHAX_CKPT_DEFAULT_NAME "checkpoint"
char *phax_ckpt_model_path(const char *path);        // resolves a directory and links
char *phax_ckpt_state_path(const char *model_path);  // "<stem>.state.safetensors"
char *phax_ckpt_vocab_path(const char *model_path);  // "<stem>.vocab"

// Write the vocabulary file, then the model file (both atomic). cfg must be
// resolved and its vocab_size equal the vocabulary's size; layout must be
// the layout of cfg.
int phax_ckpt_save(const char *model_path, const phax_ckpt *ck);

// Read and validate a model checkpoint (path: the model file or a run
// folder). expect_family: a phax_family the caller requires, or −1 for any.
// Refused, each with one line naming the file: missing, truncated or
// malformed file; not a phax checkpoint (format metadata); invalid config
// (maxima included); a family other than expected; a tensor missing, extra,
// of the wrong shape or not F32; a tensor holding a NaN or Inf (named); a bad
// counter (train_batch > 2^20 or train_seq > PHAX_MAX_SEQ, phax train's
// limits); the vocabulary file missing or unreadable, its hash or size not
// matching. Every tensor is checked on the file's bytes before the parameters
// are allocated. On error *ck is left empty (safe to free).
int phax_ckpt_load(const char *path, int expect_family, phax_ckpt *ck);
void phax_ckpt_free(phax_ckpt *ck);

// ---------------------------------------------------------------------------
// Training state (AdamW moments and what a resume needs).
typedef struct {
    int64_t step;          // must equal the model file's step
    phax_dtype dtype;      // PHAX_DT_F32 (float moments) or PHAX_DT_F64 (double)
    void *m, *v;           // (layout.numel) each, in layout order, of dtype
    void *master;          // F64 only: the float64 parameters, or NULL
    char *options_json;    // the trainer's resumable options (JSON text)
    char *rng_json;        // seeds of every RNG stream (JSON text)
    char *data_json;       // identity of the training data (JSON text)
} phax_ckpt_state;

// Save: the caller's buffers are read, nothing is kept. JSON fields may be
// NULL (stored as "{}").
int phax_ckpt_state_save(const char *state_path, const phax_layout *L, const phax_ckpt_state *s);
// Load and validate against layout L (every "m."/"v." tensor present, of the
// layout's shape, one dtype F32 or F64; "p." tensors only with F64 and then
// all of them; nothing extra; every value finite), all checked before m, v
// (and master) are allocated with phax_alloc; strdup's the JSON fields;
// release with phax_ckpt_state_free.
int phax_ckpt_state_load(const char *state_path, const phax_layout *L, phax_ckpt_state *s);
void phax_ckpt_state_free(phax_ckpt_state *s);
// PHAX_ERR "<state_path>: training state is at step S but the model file is at
// step M (torn checkpoint)" when the pair does not belong together.
int phax_ckpt_state_check(const char *state_path, const phax_ckpt_state *s, int64_t model_step);

// ---------------------------------------------------------------------------
// Run folders: checkpoint generations (docs/train.md).
//
// A run folder holds generations "<dir>/ckpt-<step, 8+ digits>/" with the
// three files checkpoint.safetensors, checkpoint.state.safetensors and
// checkpoint.vocab, and "<dir>/checkpoint.safetensors", a relative symlink to
// the current generation's model file. A generation is written in a folder of
// its own with an unpredictable name, every file and the folder fsync'd, then
// renamed to ckpt-<step> and the run folder fsync'd; only then is a new link
// renamed over the old one (the one atomic step that makes it current) and the
// run folder fsync'd again. After that, every generation but the new and the
// previous current one, and any unfinished temporary folder, is removed. A
// kill at any moment leaves the previous or the new generation current, both
// complete. The caller must hold the run folder (one writer at a time).
#define PHAX_CKPT_GEN_PREFIX "ckpt-"
// 1 (and *step, when not NULL) when name is a generation folder's name.
int phax_ckpt_gen_name(const char *name, int64_t *step);
// Save ck (model + vocabulary) and, when st is not NULL, the training state
// (layout L) as generation ck->step of run folder dir and make it current.
// On error the previous generation stays current.
int phax_ckpt_save_generation(const char *dir, const phax_ckpt *ck, const phax_layout *L,
                              const phax_ckpt_state *st);

#endif
