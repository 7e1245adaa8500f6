/* env-flag.h -- the one reading of a boolean environment variable,
   for libkamepool and libckarena alike.

   Copyright (C) 2026 The kamepool authors.
   This file is part of kamepool, free software under the GNU LGPL
   version 2.1 or later; see COPYING.  */

#ifndef ENV_FLAG_H
#define ENV_FLAG_H

#include <stdbool.h>
#include <string.h>
#include <strings.h>

/* The words of a switch, as the reports and the man pages list them.
   One set everywhere: a word outside it is refused, never guessed at
   ("flase", "disable" and "none" used to switch things on).  */
#define ENV_FLAG_FORMS "1, yes, true, on, 0, no, false or off (any case)"

/* V, the value of a switch: 1 for "1", "yes", "true" and "on", 0 for
   "0", "no", "false" and "off" (any case), -1 for anything else,
   empty included (the caller decides what unset and empty mean).  */
static inline int
env_flag_parse (const char *v)
{
  static const char *const on[] = { "1", "yes", "true", "on" };
  static const char *const off[] = { "0", "no", "false", "off" };
  for (unsigned i = 0; i < sizeof on / sizeof on[0]; i++)
    {
      if (strcasecmp (v, on[i]) == 0)
        return 1;
      if (strcasecmp (v, off[i]) == 0)
        return 0;
    }
  return -1;
}

/* V, the value of a boolean environment variable (getenv's result):
   unset (NULL), empty and a word outside the set give DFLT; the
   callers report the last case (env_flag_parse).  */
static inline bool
env_flag_value (const char *v, bool dflt)
{
  if (v == NULL || *v == '\0')
    return dflt;
  int f = env_flag_parse (v);
  return f < 0 ? dflt : f == 1;
}

#endif /* ENV_FLAG_H */
