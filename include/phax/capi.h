// libphax: phax in process, for callers that are not C programs (python/phax over ctypes).
// Tensors go in and come out as safetensors images in memory: the bytes a file would hold,
// read with every check a file gets (phax_st_read_mem), so nothing touches the disk.
//
// Every int function returns 0, or PHAX_ERR with the reason, one line, in phax_capi_error()
// (thread-local: read it on the thread that made the call). Buffers and strings handed out
// are freed with phax_capi_free; reports with phax_capi_report_free.
#ifndef PHAX_CAPI_H
#define PHAX_CAPI_H

#include <stddef.h>

const char *phax_capi_version(void);  // PHAX_VERSION
const char *phax_capi_error(void);    // the last failure's one line
void phax_capi_free(void *p);

// `phax oracle OP IN OUT` with IN the image in (n bytes) and OUT's bytes returned in *out
// (*out_len bytes): the very bytes the command writes. Messages name IN "inputs".
// max_mib > 0: the memory limit in MiB (--max-memory); otherwise the oracle's default.
int phax_capi_oracle(const char *op, const void *in, size_t n, double max_mib, unsigned char **out,
                     size_t *out_len);

// `phax check OP IN THEIRS --precision P`: the judgement of the outputs in the image theirs
// (tn bytes; named "theirs" in messages) against op on the image in. PHAX_ERR when it cannot
// be made (an unknown op or precision, a bad image, an input the oracle refuses); a report
// whose verdict is 2 (MISMATCH) when THEIRS's names, dtypes or shapes do not fit.
typedef struct phax_check_report phax_check_report;
int phax_capi_check(const char *op, const void *in, size_t n, const void *theirs, size_t tn, const char *precision,
                    double max_mib, phax_check_report **out);
int phax_capi_report_verdict(const phax_check_report *r);  // 0 PASS, 1 FAIL, 2 MISMATCH: the exit status
int phax_capi_report_rows(const phax_check_report *r);
// Row i's tensor name; v = {rel. error, baseline rel. error, ratio, bound}; *pass 0/1. NULL if i is out of range.
const char *phax_capi_report_row(const phax_check_report *r, int i, double v[4], int *pass);
int phax_capi_report_problems(const phax_check_report *r);
const char *phax_capi_report_problem(const phax_check_report *r, int i);  // NULL if i is out of range
// What `phax check` prints (json: with --json); free with phax_capi_free. NULL if out of memory.
char *phax_capi_report_text(const phax_check_report *r, int json);
void phax_capi_report_free(phax_check_report *r);

// A model checkpoint (a model file or a run folder, as `phax info` takes it), read and
// validated by phax_ckpt_load, as an image: every parameter in F32 under its layout name
// (docs/spec.md §3.6, PyTorch-style), metadata "format", "config" (the resolved config
// JSON), "step" and "tokens_seen".
int phax_capi_checkpoint(const char *path, unsigned char **out, size_t *out_len);

#endif
