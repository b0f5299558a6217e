"""The CDK app that deploys fleetmem (run from the repository root: `cdk synth`)."""
