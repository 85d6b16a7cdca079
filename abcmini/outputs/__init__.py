"""What a run leaves for people to read: the report, the dashboard, figures and wandb tracking."""
