"""What the teachers agree on: canonical actions, intent keys, and the consensus methods. Pure: no I/O.

Owns: an action's canonical form (`canonical`) and intent key (`intent`, `shell_intent`, rules as data in
configs/), the methods by name (`methods.run_method`: `vote`, `similarity`, `weighted` with Dawid–Skene
reliability, `judge`'s prompt and parsing), validity screening against a state's tools (`validity`),
early stopping (`early_stop`) and the result every method returns (`result.ConsensusResult`).
Must not: read or write files, call an LLM (the judge's call is made by `replay.decide`).
Start at `methods.run_method` and `vote`.
"""
