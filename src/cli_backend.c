// --backend of a command (cli.h), apart from cli.c so that the commands' parsers (src/cmd_args.h)
// and the fuzz harnesses that link them need no backend.
#include "cli.h"
#include "phax/backend.h"
#include "phax/core.h"

const phax_backend_ops *cli_backend(const char *cmd, const char *name) {
    const phax_backend_ops *be = phax_backend_find(name);
    if (!be) cli_die(cmd, "--backend: %s", phax_error());
    return be;
}
