"""RankZero's question bank: YAML files under ``questions/bank``, their schema and loader."""
