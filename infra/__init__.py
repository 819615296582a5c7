"""What every driver (eval, grade, synthesis, training, the viewer) stands on: run directories that
know what run they hold (`rundir`), the append-only JSONL run log and atomic writes (`runlog`), and
the registries users extend, with plugin loading (`plugins`), and the former spellings of
what users type, read with a warning (`renames`)."""
