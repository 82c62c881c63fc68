"""Schedules: the plan (core), binding to buffers (plan, layout), running them (executor, simulate)."""
