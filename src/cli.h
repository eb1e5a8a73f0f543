// Pieces every phax subcommand shares: one-line errors that exit, a clock.
#ifndef PHAX_CLI_H
#define PHAX_CLI_H

// "<cmd>: <message>" on stderr and exit(1); cmd is "phax train", "phax eval", ...
_Noreturn void cli_die(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
// Monotonic seconds.
double cli_now(void);

#endif
