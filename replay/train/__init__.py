"""Training a student on a run's dataset with TRL, and measuring what it learned on held-out data.

Owns: the trainers' setup for `--format dpo | kto | sft` (`trainers`), the held-out yardsticks — the
test split's pairs and the **recovery set** built from the traces (`heldout`) —, the log-likelihoods of
pairs under a model (`scoring`), the figures drawn from them with their intervals (`figures`) and the
report beside the adapter (`report`). Start at `run.train`; `cli` is the examples' command line and
`replay.ablation.training` trains one student per teacher pool with it.
Must not: ask a teacher, decide a consensus or write a run's outputs. torch, transformers, trl and peft
are imported inside the functions that need them.
"""
