SELECT arg FROM argv ORDER BY rowid;
