// `phax train` in pieces (docs/train.md):
//   train_opts.c  options: parsing, validation, the JSON stored in the training state,
//                 and the model config they make
//   train_data.c  the corpus: where its files are, its vocabulary and tokens, their identity
//   trainer.c     the model and its AdamW optimizer on a backend (phax/backend.h)
//   train.c       the loop: steps, evaluation, checkpoints, resume
#ifndef PHAX_SRC_TRAIN_H
#define PHAX_SRC_TRAIN_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cli.h"
#include "phax/backend.h"
#include "phax/checkpoint.h"
#include "phax/schedule.h"
#include "phax/model.h"
#include "phax/tokenizer.h"

// Errors: one line on stderr, "phax train: <file or option>: <what>", exit 1.
#define die(...) cli_die("phax train", __VA_ARGS__)
#define die_lib() die("%s", phax_error())  // the library's message names the file
#define file_exists cli_exists
#define path_join(dir, name) cli_path_join("phax train", dir, name)

#define MAX_SETS 64
#define DEFAULT_STEPS 1000

// ---------------------------------------------------------------------------
// Options (train_opts.c)

typedef struct {
    // task: "lm" (a text corpus) or "recall" (synthetic associative recall, docs/recall.md)
    const char *task;
    int recall_pairs, recall_queries;
    int recall_vary;  // mqar: training rows of 1..P pairs (phax_mqar_train_sample)
    // model
    const char *family, *config_path;
    const char *sets[MAX_SETS];
    int nsets;
    // data
    const char *data_dir, *train_path, *valid_path, *tokenizer;
    long vocab_max;  // word tokenizer: at most this many words (0 = every word of the train file)
    // run length, batch
    long steps;
    double time_budget;
    int B, T;
    // optimizer
    double lr, min_lr, beta1, beta2, eps, wd, clip;
    long warmup;
    uint64_t seed;
    double niah_frac;  // fraction of batch rows replaced by needle-in-a-haystack examples
    unsigned niah_variants;  // --niah-variants: mask of phax_niah variants (0 = RULER's four)
    int niah_digits;         // --niah-digits: passkey digits (0 = the default, 2)
    const char *backend;  // as given ("fast" is the cpu backend) and stored in the state
    const char *precision;  // --precision f32|bf16 or NULL: bf16 makes backend cpu_bf16
    // evaluation, checkpoints, output
    long eval_every, eval_tokens, ckpt_every, log_every, stop_after;
    const char *out, *cache_dir;
    int resume;
} train_opts;

train_opts train_opts_default(void);
// Parse argv into o. *changing: the first flag that changes the run (refused
// with --resume), or NULL. --help prints the usage and exits 0.
void train_parse_args(int argc, char **argv, train_opts *o, const char **changing);
int train_is_recall(const train_opts *o);  // recall or mqar (rows from core/recall.c)
int train_is_mqar(const train_opts *o);
// The backend --backend names ("fast": cpu), or die with one line.
const phax_backend_ops *train_backend(const train_opts *o);
// Numbers that parse but make no sense (also checked on the options a resumed state restores).
void train_check_numbers(const train_opts *o);
// train_check_numbers and the combinations of a new run.
void train_check_opts(const train_opts *o);
char *train_u64_str(uint64_t v, char buf[24]);
// The options stored in the training state, and back (strings then point into *keep).
char *train_opts_to_json(const train_opts *o, const char *train, const char *valid, int split);
void train_opts_from_json(train_opts *o, const char *json, const char *where, json_t **keep, int *split);
// The model config: {"family"} or the --config file, then --family, then every
// --set, then vocab_size (the tokenizer's) and train_len (= T unless given).
phax_model_cfg train_build_config(const train_opts *o, int vocab_size);

// ---------------------------------------------------------------------------
// Data (train_data.c)

typedef struct {
    char *train, *valid;   // files (valid may be NULL)
    int split;             // 1: one file (input.txt) split 90/10
    phax_vocab *vocab;
    int32_t *all;          // the tokens as loaded (train, or the whole split file)
    int32_t *valid_tok;    // separately loaded valid tokens (NULL when split or none)
    const int32_t *tr, *va;
    size_t ntr, nva;
    // --resume: the files' identities from the training state (corpus_check_files); the
    // tokens are then loaded only from bytes that match them (phax_tokens_load_expected).
    int expect;
    phax_source_identity want[2];  // train, valid
} corpus;

// A corpus file must be a non-empty regular file (checked before anything is written).
void corpus_check_file(const char *path);
void corpus_locate(corpus *c, const train_opts *o);
void corpus_vocab(corpus *c, const train_opts *o);
// cache_dir NULL: tokenize in memory and write no cache (a resumed run whose
// data are not verified yet).
void corpus_tokens(corpus *c, const char *cache_dir);
void corpus_free(corpus *c);
// --resume: log.jsonl (path) keeps its lines of steps ≤ keep_step, streamed into an atomic
// replacement; a link or a non-regular file there is refused (src/train_log.c).
void train_log_truncate(const char *path, long keep_step);

// The data identity JSON of a state names its files' identities (the layout this phax writes).
int corpus_has_identities(const char *data_json);
// --resume: the data files must be the bytes the state names (refused with one line otherwise).
void corpus_check_files(corpus *c, const char *data_json, const char *where);
// The token-stream fields of two data identities agree.
int corpus_same_tokens(const char *a, const char *b);
// Identity of the token streams and of their files (stored in the state).
char *corpus_identity(const corpus *c);

// ---------------------------------------------------------------------------
// The model and optimizer on one backend (trainer.c)

typedef struct {
    const phax_backend_ops *be;
    phax_bmodel *m;
    phax_model_cfg cfg;      // resolved
    const phax_layout *L;
    int B, T;
    int32_t *x, *y;          // (B, T) batch
    int *mix_off, *mix_nb;   // pha: offset and size of blocks.{l}.mix.p (nb 0 = none)
} trainer;

void trainer_new(trainer *t, const phax_model_cfg *cfg, const train_opts *o);
void trainer_free(trainer *t);
// Forward + backward on the batch in t->x / t->y: *loss.
int trainer_grad(trainer *t, int window, double *loss);
// AdamW update number `step1` (1-based). PHAX_ERR (nothing updated) on a
// non-finite gradient norm, which is still returned in *gnorm.
int trainer_update(trainer *t, const train_opts *o, double lr, long step1, double *gnorm);
// Mean loss of the batch in t->x / t->y (forward only).
int trainer_loss(trainer *t, int window, double *loss);
// Forward with the logits (B, T, V) in the backend's dtype (trainer_logits_new), and the mean loss.
void *trainer_logits_new(const trainer *t);
double trainer_logit(const trainer *t, const void *logits, size_t i);
int trainer_logits(trainer *t, int window, void *logits, double *loss);
// One parameter value as double (for the mix weights).
double trainer_param_at(const trainer *t, size_t i);
// Install a checkpoint's parameters and moments (sp: the state's path, for messages).
void trainer_restore(trainer *t, const phax_ckpt *ck, const phax_ckpt_state *s, const char *sp);
// The float32 parameters (the model file's) and the state's moments (and float64
// master parameters on ref) of the trainer, in buffers the caller frees with
// trainer_snapshot_free.
void trainer_snapshot(const trainer *t, float **params, phax_ckpt_state *s);
void trainer_snapshot_free(float *params, phax_ckpt_state *s);

#endif
