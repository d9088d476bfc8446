"""Workers: processes that run, recover, time and schedule runs from a shared store."""
