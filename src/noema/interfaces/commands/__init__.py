"""The work behind `noema`'s subcommands: run, status, service, setup, doctor, memory,
schedule, docs and the file versions."""
