repeat {}
