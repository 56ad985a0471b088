stop("boom")
