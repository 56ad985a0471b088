: boom  1 0 / . ;
boom bye
