error("something went wrong");
