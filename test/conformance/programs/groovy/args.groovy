args.each { print it + "\n" }
