"""Memory and devices: where an array lives and its address
(``memory``), the CUDA runtime seam and CUDA-awareness (``cuda``),
the stream and event rules of a device call (``rules``) and schedules
compiled into device steps (``steps``). May import the schedule
format and below; nothing outside ``cuda`` imports a CUDA library.
"""
