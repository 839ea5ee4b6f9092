"""Pipeline-parallel jobs (issue #10; thesis chapters 2-4): schedules as data, a validator and
simulator, a multi-process executor, PipeDream's partitioner, PipeDream-2BW's planner and
layer-wise checkpoints for morphing. See docs/pipelines.md."""
