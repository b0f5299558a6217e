"""fleetmem inside the agent frameworks fleets are built with, each over the typed client
(`fleetmem.client`) and each its own optional extra: nothing here is imported unless used."""
