console.log a for a in process.argv[2..]
