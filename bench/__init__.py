"""Benchmarks of the non-functional targets of SPEC §14: run `python -m bench`.

`bench.pool` builds a people-and-channels world and memory pools of a given size through the
real services; `bench.timing` repeats a call and reports percentiles, queries and decryptions;
`bench.memory` measures the memory reads of [Q1] on those pools; `bench.turn` the memory
overhead of a turn [Q2] (`python -m bench --turn`); `bench.lock` how long changes hold a pool's
lock and readers wait [L2] (`python -m bench --lock`).
"""
