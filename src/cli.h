// Pieces every phax subcommand shares: one-line errors that exit, option parsing, paths
// (the clock is phax_clock in phax/core.h).
#ifndef PHAX_CLI_H
#define PHAX_CLI_H

#include <stdint.h>

#include "phax/backend.h"
#include "phax/model.h"  // PHAX_MAX_SEQ: the longest sequence any command takes (--seq, a
                         // window, a prompt plus the tokens generated, a recall prompt)

// "<cmd>: <message>" on stderr and exit(1); cmd is "phax train", "phax eval", ...
_Noreturn void cli_die(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Set (by src/dist.c, for a run of several MPI ranks): cli_die hands it the line (without its
// newline) instead of printing it and exiting; it must not return.
extern void (*cli_die_hook)(const char *line);
// The same with exit status `code` (phax check refuses with 2).
_Noreturn void cli_die_code(int code, const char *cmd, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
// exit(code) after --help or a usage line; through cli_exit_hook when set (it must not return:
// a fuzz harness jumps back out of the parser).
_Noreturn void cli_exit(int code);
extern void (*cli_exit_hook)(int code);
// The integer value of option `flag`, or cli_die when s is not an integer in [lo, hi].
long cli_parse_long(const char *cmd, const char *flag, const char *s, long lo, long hi);
// A number in [0, 1] (a needle depth), or cli_die "FLAG: 'S' is not a depth in [0, 1]".
double cli_parse_depth(const char *cmd, const char *flag, const char *s);
// Split the comma list s into at most max items, pointers into buf (a copy of s, of CLI_LIST_BYTES);
// cli_die when s is longer than that, has more than max items, or none. Returns the count.
#define CLI_LIST_BYTES 4096
int cli_split_list(const char *cmd, const char *flag, const char *s, char buf[CLI_LIST_BYTES], char **items, int max);
// The unsigned 64-bit value of option `flag` (a seed), or cli_die when s is not one.
uint64_t cli_parse_u64(const char *cmd, const char *flag, const char *s);
// The backend named by --backend (phax/backend.h), or cli_die with one line when the
// name is unknown or the backend is not built.
const phax_backend_ops *cli_backend(const char *cmd, const char *name);
// --window N (N ≥ 0; −1 = not given) of a command on a checkpoint of config c: cli_die
// "--window applies to the swax, swa, mlstm, swa_full and swax_gdn families; ..." when c's family ignores a
// call's window (phax_plan_takes_window: it uses attn_window).
void cli_check_window(const char *cmd, const phax_model_cfg *c, long window);
// "dir/name", malloc'd (cli_die on out of memory).
char *cli_path_join(const char *cmd, const char *dir, const char *name);
// Whether anything exists at p (cli_exists), or a regular file (cli_is_file).
int cli_exists(const char *p);
int cli_is_file(const char *p);
// Take every "--max-corpus-bytes N" (N: bytes, or with a K, M or G suffix, binary) out of
// argv, set the library's limit on a text file (phax_data_set_max_bytes), and return the
// new argc. Every command that reads text takes it (phax main applies it before the
// subcommand parses its own options, so `train --resume` accepts it too).
int cli_take_max_corpus_bytes(const char *cmd, int argc, char **argv);

#endif
