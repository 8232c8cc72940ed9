"""castguard's small mechanisms, one module each: child processes, locks, atomic writes, the ORT environment,
provider names, the precision table, usage errors and the version. Everything above imports these; they import
nothing of castguard's above them."""
